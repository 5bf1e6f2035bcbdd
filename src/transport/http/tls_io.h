// The HTTP server's TLS I/O (http_server.h, ServerOptions::tls): writing a
// response's parts through a TlsStream, and logging a refused connection.
// Kept apart so that the loop's file (http_loop.cc) holds the plaintext
// mechanism.
//
// Thread-safety: WriteTls as the stream's (its owner serializes calls);
// LogTlsRefusal from any thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "crypto/tls_stream.h"

namespace somm::http {

// WriteSome (http_loop.cc) through TLS, with the same results: the bytes
// written, 0 when the socket is full, -1 when the connection is broken. It
// stops at the first record the socket does not take; the caller retries from
// there with the same bytes.
ssize_t WriteTls(crypto::TlsStream& tls, const std::string_view* parts, int count);

// One warning line for a refused TLS connection, naming the peer and the
// reason; at most one a second, so that a scan of the port cannot flood the
// log.
void LogTlsRefusal(int fd, const std::string& reason);

}  // namespace somm::http
