// HTTP/1.1 request framing (RFC 9112) for the event-driven server: the
// request head, how long the body is, chunked transfer coding and
// Content-Encoding. Pure functions over bytes already read; no sockets.
//
// Every rejection carries the HTTP status to answer and a message that names
// the problem (400 malformed, 413 body too large, 414 target too long, 415
// encoding, 431 head too large, 501 unknown transfer coding, 505 version).
// Framing that could be read two ways (Content-Length and Transfer-Encoding
// together, two differing Content-Lengths) is a 400: the classic
// request-smuggling shapes.
//
// Thread-safety: pure functions; a ChunkedBodyDecoder is one connection's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace somm::http {

struct HttpError {
  int status = 400;
  std::string message;
};

struct RequestHead {
  std::string method;
  std::string target;  // as sent: "/v2/models/m/infer?x=1"
  std::string path;    // percent-decoded, without the query
  std::string query;   // after '?', still encoded
  int minor_version = 1;  // HTTP/1.0 or HTTP/1.1
  // Field names lower-cased, values trimmed; repeated fields stay repeated.
  std::vector<std::pair<std::string, std::string>> headers;

  // The first value of a field, by its lower-case name.
  const std::string* Find(std::string_view lower_name) const;
  // Whether a comma-separated field lists a token (case-insensitive).
  bool HasToken(std::string_view lower_name, std::string_view token) const;
};

struct HeadLimits {
  size_t max_head_bytes = 64 << 10;
  size_t max_target_bytes = 8 << 10;
};

// Looks for a complete head (up to the empty line) at the start of `buffer`.
// nullopt = need more bytes (and the head so far is within the limit);
// otherwise the head and its length in bytes, or why it is rejected.
struct ParsedHead {
  RequestHead head;
  size_t head_bytes = 0;
};
struct HeadResult {
  std::optional<ParsedHead> parsed;
  std::optional<HttpError> error;
};
HeadResult ParseRequestHead(std::string_view buffer, const HeadLimits& limits);

// How the body is delimited.
struct BodyFraming {
  enum Kind { kNone, kLength, kChunked } kind = kNone;
  uint64_t length = 0;  // kLength
};
// Rejects framing over `max_body_bytes` (413) only where the length is known
// up front; chunked bodies are checked as they decode.
std::optional<HttpError> DecideBodyFraming(const RequestHead& head, size_t max_body_bytes,
                                           BodyFraming* framing);

// Keep-alive after this request: HTTP/1.1 unless "Connection: close",
// HTTP/1.0 only with "Connection: keep-alive".
bool WantsKeepAlive(const RequestHead& head);

// The chunked transfer coding, fed as bytes arrive.
class ChunkedBodyDecoder {
 public:
  explicit ChunkedBodyDecoder(size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}

  // Consumes what it can of `input`, appending decoded bytes to *body.
  // Returns the bytes consumed; done() once the last chunk and trailers are
  // in, error() once the coding is broken or the body passes the limit.
  size_t Feed(std::string_view input, std::string* body);
  bool done() const { return state_ == State::kDone; }
  const std::optional<HttpError>& error() const { return error_; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone, kError };
  size_t Fail(int status, std::string message);

  size_t max_body_bytes_;
  State state_ = State::kSize;
  uint64_t remaining_ = 0;
  std::optional<HttpError> error_;
};

// Undoes Content-Encoding (identity, gzip, deflate) in place, keeping the
// result within max_body_bytes (413), or 415 for an encoding it does not know.
std::optional<HttpError> DecodeContent(const RequestHead& head, size_t max_body_bytes,
                                       std::string* body);

// Percent-decodes a path or query component; '+' stays '+' in paths and is a
// space in queries. Invalid escapes are an error.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// The first value of `key` in a query string ("a=1&limit=5"), decoded.
std::optional<std::string> QueryParam(std::string_view query, std::string_view key);

}  // namespace somm::http
