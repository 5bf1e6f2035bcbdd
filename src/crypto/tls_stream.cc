#include "crypto/tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "crypto/openssl_error.h"

namespace somm::crypto {
namespace {

using internal::TakeOpenSslError;

Status FileError(const std::string& flag, const std::string& path, const std::string& what) {
  return InvalidArgument(flag + " " + path + ": " + what);
}

// A TLS record of the handshake type starts every ClientHello; anything else
// is not TLS (an HTTP request line starts with a letter).
constexpr unsigned char kTlsHandshakeRecord = 0x16;

// What TLS 1.2 may negotiate: ECDHE key exchange, AES-GCM or ChaCha20-Poly1305.
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

}  // namespace

StatusOr<std::shared_ptr<const TlsServerContext>> TlsServerContext::Create(
    const TlsServerFiles& files) {
  if (Status valid = files.Validate(); !valid.ok()) return valid;
  if (!files.enabled()) return InvalidArgument("TLS needs --tls-cert and --tls-key");
  for (const auto& [flag, path] : {std::pair{"--tls-cert", files.cert_file},
                                   std::pair{"--tls-key", files.key_file},
                                   std::pair{"--tls-client-ca", files.client_ca_file}}) {
    if (!path.empty() && !std::filesystem::is_regular_file(path)) {
      return FileError(flag, path, "no such file");
    }
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("TLS: cannot create a context: " + TakeOpenSslError());
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> owned(ctx, &SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // TLS 1.2 offers forward-secret key exchange with AEAD ciphers only (TLS
  // 1.3's suites are all of that kind already): no RSA key exchange, no CBC.
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return Internal("TLS: cannot set the cipher list: " + TakeOpenSslError());
  }
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  // Partial writes: a large response goes out record by record as the
  // socket takes it; a retried write may come from another buffer (the HTTP
  // server copies what is left into the connection's out buffer).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return FileError("--tls-cert", files.cert_file, TakeOpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    if (ERR_GET_REASON(ERR_peek_error()) != X509_R_KEY_VALUES_MISMATCH) {
      return FileError("--tls-key", files.key_file, TakeOpenSslError());
    }
    return FileError("--tls-key", files.key_file,
                     "does not match the certificate " + files.cert_file);
  }
  const bool mutual = !files.client_ca_file.empty();
  if (mutual) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca_file.c_str(), nullptr) != 1) {
      return FileError("--tls-client-ca", files.client_ca_file, TakeOpenSslError());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str());
    if (names == nullptr) {
      return FileError("--tls-client-ca", files.client_ca_file, "holds no certificate");
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  // Resumed sessions of verified clients need a context id, or OpenSSL
  // refuses the resumption.
  static const unsigned char kSessionContext[] = "somm";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  return std::shared_ptr<const TlsServerContext>(new TlsServerContext(owned.release(), mutual));
}

StatusOr<std::shared_ptr<const TlsServerContext>> TlsServerContext::CreateIfEnabled(
    const TlsServerFiles& files) {
  if (Status valid = files.Validate(); !valid.ok()) return valid;
  if (!files.enabled()) return std::shared_ptr<const TlsServerContext>();
  return Create(files);
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<TlsStream> TlsServerContext::NewStream(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  if (SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsStream>(new TlsStream(ssl, fd));
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

bool TlsStream::handshake_done() const { return SSL_is_init_finished(ssl_) == 1; }

ssize_t TlsStream::Result(int ret, const char* what) {
  if (ret > 0) return ret;
  const int error = SSL_get_error(ssl_, ret);
  switch (error) {
    case SSL_ERROR_WANT_READ: return kWantRead;
    case SSL_ERROR_WANT_WRITE: return kWantWrite;
    case SSL_ERROR_ZERO_RETURN: return 0;  // close_notify
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return kWantRead;
        // EOF without close_notify: the peer is gone; as a plain close.
        if (ret == 0 || errno == ECONNRESET || errno == EPIPE) return 0;
        error_ = std::string(what) + ": " + std::strerror(errno);
        return kError;
      }
      [[fallthrough]];
    default: {
      error_ = std::string(what) + ": " + TakeOpenSslError();
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) {
        error_ += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
      }
      return kError;
    }
  }
}

ssize_t TlsStream::Read(char* buffer, size_t size) {
  if (!checked_first_byte_) {
    unsigned char first = 0;
    const ssize_t n = recv(fd_, &first, 1, MSG_PEEK);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return kWantRead;
      return 0;
    }
    checked_first_byte_ = true;
    if (first != kTlsHandshakeRecord) return kNotTls;
  }
  ERR_clear_error();
  const int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  return Result(n, handshake_done() ? "TLS read" : "TLS handshake");
}

ssize_t TlsStream::Write(std::string_view data) {
  if (data.empty()) return 0;
  ERR_clear_error();
  const int n = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), INT_MAX)));
  return Result(n, handshake_done() ? "TLS write" : "TLS handshake");
}

void TlsStream::Shutdown() {
  if (shut_) return;
  shut_ = true;
  if (!handshake_done()) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // sends close_notify; the peer's is not waited for
  ERR_clear_error();
}

}  // namespace somm::crypto
