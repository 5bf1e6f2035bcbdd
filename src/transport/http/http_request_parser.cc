#include "transport/http/http_request_parser.h"

#include <strings.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace somm::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// RFC 9110 tchar: the characters a method or a field name may use.
bool IsTokenChar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

HeadResult Reject(int status, std::string message) {
  HeadResult r;
  r.error = HttpError{status, std::move(message)};
  return r;
}

// The end of the head: the offset just past the empty line, or npos.
// Bare LF line ends are accepted as well as CRLF (RFC 9112 section 2.2).
size_t FindHeadEnd(std::string_view buffer) {
  size_t pos = 0;
  while ((pos = buffer.find('\n', pos)) != std::string_view::npos) {
    const size_t next = pos + 1;
    if (next < buffer.size() && buffer[next] == '\n') return next + 1;
    if (next + 1 < buffer.size() && buffer[next] == '\r' && buffer[next + 1] == '\n') {
      return next + 2;
    }
    pos = next;
  }
  return std::string_view::npos;
}

}  // namespace

const std::string* RequestHead::Find(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return &value;
  }
  return nullptr;
}

bool RequestHead::HasToken(std::string_view lower_name, std::string_view token) const {
  for (const auto& [name, value] : headers) {
    if (name != lower_name) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      if (EqualsNoCase(Trim(rest.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return false;
}

HeadResult ParseRequestHead(std::string_view buffer, const HeadLimits& limits) {
  // Clients may send empty lines between requests (RFC 9112 section 2.2).
  size_t skipped = 0;
  while (skipped < buffer.size() && (buffer[skipped] == '\r' || buffer[skipped] == '\n')) {
    ++skipped;
  }
  const size_t end = FindHeadEnd(buffer.substr(skipped));
  if (end == std::string_view::npos) {
    const size_t first_line = buffer.find('\n', skipped);
    const size_t line_bytes =
        first_line == std::string_view::npos ? buffer.size() - skipped : first_line - skipped;
    if (line_bytes > limits.max_target_bytes + 32) {
      return Reject(414, "request target exceeds " + std::to_string(limits.max_target_bytes) +
                             " bytes");
    }
    if (buffer.size() - skipped > limits.max_head_bytes) {
      return Reject(431, "request head exceeds " + std::to_string(limits.max_head_bytes) +
                             " bytes");
    }
    return {};
  }
  if (end > limits.max_head_bytes) {
    return Reject(431,
                  "request head exceeds " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  std::string_view text = buffer.substr(skipped, end);
  auto next_line = [&text]() {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };

  ParsedHead out;
  out.head_bytes = skipped + end;
  RequestHead& head = out.head;
  // Request line: METHOD SP target SP HTTP/1.x
  const std::string_view request_line = next_line();
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Reject(400, "malformed request line");
  }
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(method)) return Reject(400, "malformed request method");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1.") {
    if (version.substr(0, 5) == "HTTP/") {
      return Reject(505, "HTTP version '" + std::string(version) + "' is not supported");
    }
    return Reject(400, "malformed request line");
  }
  if (version[7] != '0' && version[7] != '1') {
    return Reject(505, "HTTP version '" + std::string(version) + "' is not supported");
  }
  head.minor_version = version[7] - '0';
  if (target.size() > limits.max_target_bytes) {
    return Reject(414, "request target exceeds " + std::to_string(limits.max_target_bytes) +
                           " bytes");
  }
  if (target.empty() || target.front() != '/') {
    return Reject(400, "request target must be an absolute path (origin form)");
  }
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return Reject(400, "request target contains a control character");
  }
  head.method = method;
  head.target = target;
  const size_t question = target.find('?');
  const std::optional<std::string> path = PercentDecode(target.substr(0, question), false);
  if (!path) return Reject(400, "request path has an invalid percent escape");
  head.path = *path;
  if (question != std::string_view::npos) head.query = target.substr(question + 1);

  while (true) {
    const std::string_view line = next_line();
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Reject(400, "obsolete header line folding is not accepted");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Reject(400, "header line without a colon");
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Reject(400, "malformed header name '" + std::string(name) + "'");
    const std::string_view value = Trim(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && u != '\t') || u == 0x7f) {
        return Reject(400, "header '" + std::string(name) + "' contains a control character");
      }
    }
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    head.headers.emplace_back(std::move(lower), std::string(value));
  }
  if (head.minor_version == 1 && head.Find("host") == nullptr) {
    return Reject(400, "HTTP/1.1 request without a Host header");
  }
  return HeadResult{std::move(out), std::nullopt};
}

std::optional<HttpError> DecideBodyFraming(const RequestHead& head, size_t max_body_bytes,
                                           BodyFraming* framing) {
  *framing = BodyFraming{};
  const std::string* transfer = head.Find("transfer-encoding");
  std::optional<uint64_t> length;
  for (const auto& [name, value] : head.headers) {
    if (name != "content-length") continue;
    uint64_t n = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || value.empty()) {
      return HttpError{400, "Content-Length '" + value + "' is not a byte count"};
    }
    if (length && *length != n) return HttpError{400, "conflicting Content-Length headers"};
    length = n;
  }
  if (transfer != nullptr) {
    if (length) return HttpError{400, "both Content-Length and Transfer-Encoding are set"};
    if (!EqualsNoCase(Trim(*transfer), "chunked")) {
      return HttpError{501, "Transfer-Encoding '" + *transfer +
                                "' is not supported (only chunked)"};
    }
    framing->kind = BodyFraming::kChunked;
    return std::nullopt;
  }
  // Neither: no body (RFC 9112 section 6.3), whatever the method.
  if (!length || *length == 0) return std::nullopt;
  if (*length > max_body_bytes) {
    return HttpError{413, "request body exceeds the limit of " + std::to_string(max_body_bytes) +
                              " bytes (max_body_bytes)"};
  }
  framing->kind = BodyFraming::kLength;
  framing->length = *length;
  return std::nullopt;
}

bool WantsKeepAlive(const RequestHead& head) {
  if (head.HasToken("connection", "close")) return false;
  return head.minor_version >= 1 || head.HasToken("connection", "keep-alive");
}

size_t ChunkedBodyDecoder::Fail(int status, std::string message) {
  state_ = State::kError;
  error_ = HttpError{status, std::move(message)};
  return 0;
}

size_t ChunkedBodyDecoder::Feed(std::string_view input, std::string* body) {
  size_t used = 0;
  while (used < input.size() && state_ != State::kDone && state_ != State::kError) {
    const std::string_view rest = input.substr(used);
    switch (state_) {
      case State::kSize:
      case State::kTrailer:
      case State::kDataEnd: {
        const size_t nl = rest.find('\n');
        if (nl == std::string_view::npos) {
          // A size line or trailer has no business being this long.
          if (rest.size() > 4096) return Fail(400, "chunked body: line too long");
          return used;
        }
        std::string_view line = rest.substr(0, nl);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        used += nl + 1;
        if (state_ == State::kDataEnd) {
          if (!line.empty()) return Fail(400, "chunked body: chunk data longer than its size");
          state_ = State::kSize;
        } else if (state_ == State::kTrailer) {
          if (line.empty()) state_ = State::kDone;  // trailer fields are ignored
        } else {
          const std::string_view digits = Trim(line.substr(0, line.find(';')));
          uint64_t size = 0;
          const auto [ptr, ec] =
              std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
          if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
            return Fail(400, "chunked body: malformed chunk size");
          }
          if (size > max_body_bytes_ || body->size() + size > max_body_bytes_) {
            return Fail(413, "request body exceeds the limit of " +
                                 std::to_string(max_body_bytes_) + " bytes (max_body_bytes)");
          }
          remaining_ = size;
          state_ = size == 0 ? State::kTrailer : State::kData;
        }
        break;
      }
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        body->append(rest.data(), n);
        used += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kDone:
      case State::kError:
        break;
    }
  }
  return used;
}

std::optional<HttpError> DecodeContent(const RequestHead& head, size_t max_body_bytes,
                                       std::string* body) {
  const std::string* encoding = head.Find("content-encoding");
  if (encoding == nullptr) return std::nullopt;
  const std::string_view name = Trim(*encoding);
  if (name.empty() || EqualsNoCase(name, "identity")) return std::nullopt;
  int window_bits = 0;
  if (EqualsNoCase(name, "gzip") || EqualsNoCase(name, "x-gzip")) {
    window_bits = 16 + MAX_WBITS;
  } else if (EqualsNoCase(name, "deflate")) {
    window_bits = MAX_WBITS;  // zlib-wrapped, as RFC 9110 defines deflate
  } else {
    return HttpError{415, "unsupported Content-Encoding '" + *encoding +
                              "' (gzip, deflate or identity)"};
  }
  z_stream stream{};
  if (inflateInit2(&stream, window_bits) != Z_OK) {
    return HttpError{500, "could not start decompression"};
  }
  std::string out;
  stream.next_in = reinterpret_cast<Bytef*>(body->data());
  stream.avail_in = static_cast<uInt>(body->size());
  char buffer[64 << 10];
  int rc = Z_OK;
  std::optional<HttpError> error;
  while (rc != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      error = HttpError{400, "request body is not valid " + std::string(name) + " data"};
      break;
    }
    const size_t produced = sizeof(buffer) - stream.avail_out;
    if (out.size() + produced > max_body_bytes) {
      error = HttpError{413, "request body exceeds the limit of " + std::to_string(max_body_bytes) +
                                 " bytes (max_body_bytes) once decompressed"};
      break;
    }
    out.append(buffer, produced);
    if (rc == Z_OK && produced == 0 && stream.avail_in == 0) {
      error = HttpError{400, "request body ends inside its " + std::string(name) + " stream"};
      break;
    }
  }
  inflateEnd(&stream);
  if (error) return error;
  *body = std::move(out);
  return std::nullopt;
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = HexValue(text[i + 1]);
      const int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    const std::optional<std::string> name = PercentDecode(pair.substr(0, eq), true);
    if (name && *name == key) {
      if (eq == std::string_view::npos) return std::string();
      return PercentDecode(pair.substr(eq + 1), true);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

}  // namespace somm::http
