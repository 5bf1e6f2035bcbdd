#include "loadgen/http_wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace somm::loadgen {
namespace {

constexpr std::string_view kHeadEnd = "\r\n\r\n";
// A head larger than this is not an OIP server's answer.
constexpr size_t kMaxHeadBytes = 64 * 1024;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = (a[i] >= 'A' && a[i] <= 'Z') ? static_cast<char>(a[i] + 32) : a[i];
    const char y = (b[i] >= 'A' && b[i] <= 'Z') ? static_cast<char>(b[i] + 32) : b[i];
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

StatusOr<size_t> ParseSize(std::string_view text, int base, std::string_view what) {
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument(std::string(what) + " '" + std::string(text) + "' is not a length");
  }
  return value;
}

std::string ErrnoText(std::string_view what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

StatusOr<std::optional<HttpResponseHead>> ParseResponseHead(std::string_view bytes) {
  const size_t end = bytes.find(kHeadEnd);
  if (end == std::string_view::npos) {
    if (bytes.size() > kMaxHeadBytes) {
      return InvalidArgument("response head is over " + std::to_string(kMaxHeadBytes) + " bytes");
    }
    return std::optional<HttpResponseHead>();
  }
  HttpResponseHead head;
  head.head_bytes = end + kHeadEnd.size();
  std::string_view rest = bytes.substr(0, end + 2);  // every line ends in \r\n
  const size_t line_end = rest.find("\r\n");
  const std::string_view status_line = rest.substr(0, line_end);
  rest.remove_prefix(line_end + 2);
  // "HTTP/1.1 200 OK"
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ') {
    return InvalidArgument("response does not start with an HTTP/1.x status line: '" +
                           std::string(status_line.substr(0, 64)) + "'");
  }
  SOMM_ASSIGN_OR_RETURN(const size_t status, ParseSize(status_line.substr(9, 3), 10, "status"));
  head.status = static_cast<int>(status);
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "content-length")) {
      SOMM_ASSIGN_OR_RETURN(head.content_length, ParseSize(value, 10, "Content-Length"));
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      head.chunked = EqualsIgnoreCase(value, "chunked");
    } else if (EqualsIgnoreCase(name, "connection")) {
      head.close = EqualsIgnoreCase(value, "close");
    } else if (EqualsIgnoreCase(name, "inference-header-content-length")) {
      SOMM_ASSIGN_OR_RETURN(head.json_size,
                            ParseSize(value, 10, "Inference-Header-Content-Length"));
    }
  }
  return std::optional<HttpResponseHead>(head);
}

std::string HttpPostBytes(std::string_view host_port, std::string_view path,
                          std::string_view body, std::optional<size_t> json_size,
                          std::string_view api_key) {
  std::string out;
  out.reserve(256 + body.size());
  out.append("POST ").append(path).append(" HTTP/1.1\r\nHost: ").append(host_port);
  out.append("\r\nConnection: keep-alive\r\nContent-Type: ");
  out.append(json_size ? "application/octet-stream" : "application/json");
  if (json_size) {
    out.append("\r\nInference-Header-Content-Length: ").append(std::to_string(*json_size));
  }
  if (!api_key.empty()) out.append("\r\nAuthorization: Bearer ").append(api_key);
  out.append("\r\nContent-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
  out.append(body);
  return out;
}

HttpWireConnection::HttpWireConnection(std::string host, int port, int io_timeout_ms)
    : host_(std::move(host)),
      port_(port),
      url_("http://" + host_ + ":" + std::to_string(port_)),
      io_timeout_ms_(io_timeout_ms) {}

HttpWireConnection::~HttpWireConnection() { Close(); }

void HttpWireConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reused_ = false;
  buffer_.clear();
}

Status HttpWireConnection::Connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
  if (rc != 0) return Unavailable("cannot resolve " + url_ + ": " + ::gai_strerror(rc));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = ErrnoText("socket");
      continue;
    }
    // SO_SNDTIMEO also bounds connect() on Linux.
    timeval tv{io_timeout_ms_ / 1000, (io_timeout_ms_ % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      fd_ = fd;
      break;
    }
    last_error = ErrnoText("connect");
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) return Unavailable("cannot connect to " + url_ + ": " + last_error);
  return Status::Ok();
}

Status HttpWireConnection::SendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(ErrnoText("send to " + url_));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

StatusOr<bool> HttpWireConnection::ReadMore() {
  constexpr size_t kChunk = 16 * 1024;
  const size_t old = buffer_.size();
  buffer_.resize(old + kChunk);
  while (true) {
    const ssize_t n = ::recv(fd_, buffer_.data() + old, kChunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      buffer_.resize(old);
      const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
      return Unavailable(timed_out ? "no answer from " + url_ + " within " +
                                         std::to_string(io_timeout_ms_) + " ms"
                                   : ErrnoText("recv from " + url_));
    }
    buffer_.resize(old + static_cast<size_t>(n));
    return n > 0;
  }
}

Status HttpWireConnection::ReadChunkedBody(size_t start, std::string* body, size_t* end) {
  size_t at = start;
  while (true) {
    size_t eol;
    while ((eol = buffer_.find("\r\n", at)) == std::string::npos) {
      SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
      if (!more) return Unavailable("connection closed inside a chunked body");
    }
    std::string_view size_text = std::string_view(buffer_).substr(at, eol - at);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions
    SOMM_ASSIGN_OR_RETURN(const size_t size, ParseSize(Trim(size_text), 16, "chunk size"));
    const size_t data = eol + 2;
    if (size == 0) {
      // Trailers, if any, then an empty line.
      while (true) {
        if (buffer_.size() >= data + 2 && buffer_.compare(data, 2, "\r\n") == 0) {
          *end = data + 2;
          return Status::Ok();
        }
        const size_t trailers_end = buffer_.find(kHeadEnd, data);
        if (trailers_end != std::string::npos) {
          *end = trailers_end + kHeadEnd.size();
          return Status::Ok();
        }
        SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
        if (!more) return Unavailable("connection closed inside a chunked body");
      }
    }
    while (buffer_.size() < data + size + 2) {
      SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
      if (!more) return Unavailable("connection closed inside a chunked body");
    }
    body->append(buffer_, data, size);
    at = data + size + 2;
  }
}

StatusOr<HttpWireReply> HttpWireConnection::ReadReply(bool* nothing_read) {
  *nothing_read = true;
  std::optional<HttpResponseHead> head;
  while (true) {
    SOMM_ASSIGN_OR_RETURN(head, ParseResponseHead(buffer_));
    if (head) break;
    SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
    if (!more) return Unavailable(url_ + " closed the connection before answering");
    *nothing_read = false;
  }
  *nothing_read = false;
  HttpWireReply reply;
  reply.status = head->status;
  reply.json_size = head->json_size;
  size_t end = head->head_bytes;
  if (head->chunked) {
    SOMM_RETURN_IF_ERROR(ReadChunkedBody(head->head_bytes, &reply.body, &end));
  } else if (head->content_length) {
    end = head->head_bytes + *head->content_length;
    while (buffer_.size() < end) {
      SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
      if (!more) return Unavailable("connection closed inside a response body");
    }
    reply.body.assign(buffer_, head->head_bytes, *head->content_length);
  } else if (head->status >= 200 && head->status != 204 && head->status != 304) {
    // No length: the body runs to the end of the stream.
    while (true) {
      SOMM_ASSIGN_OR_RETURN(const bool more, ReadMore());
      if (!more) break;
    }
    reply.body.assign(buffer_, head->head_bytes);
    end = buffer_.size();
    head->close = true;
  }
  buffer_.erase(0, end);
  if (head->close) Close();
  return reply;
}

StatusOr<HttpWireReply> HttpWireConnection::Exchange(std::string_view request) {
  for (int attempt = 0;; ++attempt) {
    if (fd_ < 0) SOMM_RETURN_IF_ERROR(Connect());
    // A server may close an idle keep-alive connection at any time; then the
    // request never reached it and sending again on a new connection is safe.
    const bool may_retry = reused_ && attempt == 0;
    Status sent = SendAll(request);
    if (!sent.ok()) {
      Close();
      if (may_retry) continue;
      return sent;
    }
    bool nothing_read = false;
    StatusOr<HttpWireReply> reply = ReadReply(&nothing_read);
    if (!reply.ok()) {
      Close();
      if (may_retry && nothing_read) continue;
      return reply.status();
    }
    if (fd_ >= 0) reused_ = true;
    return reply;
  }
}

}  // namespace somm::loadgen
