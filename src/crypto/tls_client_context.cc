#include "crypto/tls_client_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <filesystem>

#include "crypto/openssl_error.h"

namespace somm::crypto {
namespace {

using internal::TakeOpenSslError;

Status FileError(const std::string& what, const std::string& path, const std::string& why) {
  return InvalidArgument("TLS " + what + " " + path + ": " + why);
}

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

}  // namespace

StatusOr<std::shared_ptr<const TlsClientContext>> TlsClientContext::Create(
    const TlsClientFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return InvalidArgument("a TLS client certificate and its key go together");
  }
  for (const auto& [what, path] :
       {std::pair{"CA", files.ca_file}, std::pair{"client certificate", files.cert_file},
        std::pair{"client key", files.key_file}}) {
    if (!path.empty() && !std::filesystem::is_regular_file(path)) {
      return FileError(what, path, "no such file");
    }
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return Internal("TLS: cannot create a context: " + TakeOpenSslError());
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> owned(ctx, &SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // As the server side: partial writes, and a retried write may pass the
  // same bytes from another address.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (files.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return Internal("TLS: cannot load the system's trust store: " + TakeOpenSslError());
    }
  } else if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1) {
    return FileError("CA", files.ca_file, TakeOpenSslError());
  }
  if (!files.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
      return FileError("client certificate", files.cert_file, TakeOpenSslError());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      if (ERR_GET_REASON(ERR_peek_error()) != X509_R_KEY_VALUES_MISMATCH) {
        return FileError("client key", files.key_file, TakeOpenSslError());
      }
      ERR_clear_error();
      return FileError("client key", files.key_file,
                       "does not match the certificate " + files.cert_file);
    }
  }
  return std::shared_ptr<const TlsClientContext>(new TlsClientContext(owned.release()));
}

TlsClientContext::~TlsClientContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<TlsStream> TlsClientContext::NewStream(int fd, const std::string& host) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  std::unique_ptr<TlsStream> stream(new TlsStream(ssl, fd));  // owns ssl from here
  if (SSL_set_fd(ssl, fd) != 1) return nullptr;
  // The server's certificate must name the host dialled: its IP address, or
  // its DNS name (which SNI also carries, for servers behind one address).
  if (IsIpAddress(host)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1) return nullptr;
  } else {
    if (SSL_set1_host(ssl, host.c_str()) != 1) return nullptr;
    SSL_set_tlsext_host_name(ssl, host.c_str());
  }
  SSL_set_connect_state(ssl);
  // The server speaks first only after our ClientHello: the plaintext
  // client check of the server side does not apply.
  stream->checked_first_byte_ = true;
  return stream;
}

ssize_t TlsClientContext::Handshake(TlsStream& stream) {
  ERR_clear_error();
  const int ret = SSL_do_handshake(stream.ssl_);
  if (ret == 1) return 1;
  const ssize_t result = stream.Result(ret, "TLS handshake");
  // The server hung up mid-handshake (a plaintext port, or it refused our
  // certificate): an error, not a clean end of data.
  if (result == 0) {
    stream.error_ = "TLS handshake: the server closed the connection";
    return TlsStream::kError;
  }
  return result;
}

}  // namespace somm::crypto
