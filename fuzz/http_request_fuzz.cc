// The HTTP/1.1 request framing (http_request_parser.h) on hostile bytes: the
// head, the body framing, chunked bodies and Content-Encoding (gzip, deflate),
// the way HttpServer chains them on one connection's buffer.
//
// Invariants beyond "no crash": a parsed head never claims more bytes than
// it was given; the chunked decoder gives the same body and the same verdict
// whether the bytes arrive at once or in pieces (the server feeds it one
// read at a time), and never passes its limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "transport/http/http_request_parser.h"

namespace {

using somm::http::BodyFraming;
using somm::http::ChunkedBodyDecoder;

// Small limits so that the 413 and 431 paths are reachable by the fuzzer.
constexpr size_t kMaxBodyBytes = 64 << 10;

void Check(bool ok) {
  if (!ok) std::abort();
}

struct Decoded {
  std::string body;
  size_t consumed = 0;
  bool done = false;
  bool error = false;
};

// Feeds `input` in pieces of `piece` bytes (0 = all at once).
Decoded DecodeChunked(std::string_view input, size_t piece) {
  ChunkedBodyDecoder decoder(kMaxBodyBytes);
  Decoded d;
  size_t offered = 0;
  while (!decoder.done() && !decoder.error() && offered < input.size()) {
    const size_t n = piece == 0 ? input.size() : std::min(piece, input.size() - offered);
    offered += n;
    // Like the server, keep unconsumed bytes and offer them again with more.
    const size_t used = decoder.Feed(input.substr(d.consumed, offered - d.consumed), &d.body);
    Check(used <= offered - d.consumed);
    d.consumed += used;
  }
  d.done = decoder.done();
  d.error = decoder.error().has_value();
  Check(d.body.size() <= kMaxBodyBytes);
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const somm::http::HeadLimits limits{.max_head_bytes = 4 << 10, .max_target_bytes = 1 << 10};
  const somm::http::HeadResult result = somm::http::ParseRequestHead(input, limits);
  if (!result.parsed) return 0;
  const somm::http::ParsedHead& parsed = *result.parsed;
  Check(parsed.head_bytes <= input.size());
  const somm::http::RequestHead& head = parsed.head;
  (void)somm::http::WantsKeepAlive(head);
  (void)somm::http::QueryParam(head.query, "limit");
  (void)somm::http::PercentDecode(head.query, /*plus_is_space=*/true);

  BodyFraming framing;
  if (somm::http::DecideBodyFraming(head, kMaxBodyBytes, &framing)) return 0;
  const std::string_view rest = input.substr(parsed.head_bytes);
  std::string body;
  switch (framing.kind) {
    case BodyFraming::kNone:
      break;
    case BodyFraming::kLength:
      Check(framing.length <= kMaxBodyBytes);
      if (framing.length > rest.size()) return 0;  // the server would wait
      body.assign(rest.substr(0, framing.length));
      break;
    case BodyFraming::kChunked: {
      const Decoded whole = DecodeChunked(rest, 0);
      // The piece size comes from the input so the fuzzer explores splits.
      const size_t piece = 1 + (size == 0 ? 0 : data[size - 1] % 7);
      const Decoded pieces = DecodeChunked(rest, piece);
      Check(whole.done == pieces.done && whole.error == pieces.error);
      if (whole.done) Check(whole.body == pieces.body && whole.consumed == pieces.consumed);
      if (!whole.done) return 0;
      body = whole.body;
      break;
    }
  }
  if (!somm::http::DecodeContent(head, kMaxBodyBytes, &body)) Check(body.size() <= kMaxBodyBytes);
  return 0;
}
