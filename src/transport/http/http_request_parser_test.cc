#include "transport/http/http_request_parser.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace somm::http {
namespace {

ParsedHead MustParse(std::string_view text) {
  HeadResult r = ParseRequestHead(text, HeadLimits{});
  EXPECT_FALSE(r.error.has_value()) << (r.error ? r.error->message : "");
  EXPECT_TRUE(r.parsed.has_value());
  return r.parsed.value_or(ParsedHead{});
}

int RejectStatus(std::string_view text, HeadLimits limits = {}) {
  HeadResult r = ParseRequestHead(text, limits);
  return r.error ? r.error->status : 0;
}

TEST(ParseRequestHeadTest, RequestLineHeadersPathAndQuery) {
  const std::string text =
      "POST /v2/models/my%20model/infer?limit=5&x=a%2Bb HTTP/1.1\r\n"
      "Host: h\r\nContent-Type:  application/json \r\nX-Two: 1\r\nx-two: 2\r\n\r\nBODY";
  const ParsedHead p = MustParse(text);
  EXPECT_EQ(p.head_bytes, text.size() - 4);
  EXPECT_EQ(p.head.method, "POST");
  EXPECT_EQ(p.head.path, "/v2/models/my model/infer");
  EXPECT_EQ(p.head.query, "limit=5&x=a%2Bb");
  EXPECT_EQ(p.head.minor_version, 1);
  ASSERT_NE(p.head.Find("content-type"), nullptr);
  EXPECT_EQ(*p.head.Find("content-type"), "application/json");
  EXPECT_EQ(*p.head.Find("x-two"), "1");
  EXPECT_EQ(QueryParam(p.head.query, "x"), "a+b");
  EXPECT_EQ(QueryParam(p.head.query, "limit"), "5");
  EXPECT_EQ(QueryParam(p.head.query, "none"), std::nullopt);
}

TEST(ParseRequestHeadTest, IncompleteHeadNeedsMoreBytes) {
  HeadResult r = ParseRequestHead("GET /v2 HTTP/1.1\r\nHost: h\r\n", HeadLimits{});
  EXPECT_FALSE(r.error.has_value());
  EXPECT_FALSE(r.parsed.has_value());
}

TEST(ParseRequestHeadTest, BareLineFeedsAndLeadingEmptyLinesAreAccepted) {
  const ParsedHead p = MustParse("\r\nGET /v2 HTTP/1.0\nA: b\n\n");
  EXPECT_EQ(p.head.path, "/v2");
  EXPECT_EQ(p.head.minor_version, 0);
}

TEST(ParseRequestHeadTest, MalformedHeadsAreRejectedWithTheirStatus) {
  EXPECT_EQ(RejectStatus("NOT HTTP AT ALL\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2 HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(RejectStatus("GET /v2 HTTP/1.1\r\n\r\n"), 400);  // no Host
  EXPECT_EQ(RejectStatus("GET v2 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2%zz HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2 HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2 HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("GET /v2 HTTP/1.1\r\nBad Name: x\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(RejectStatus("G@T /v2 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(ParseRequestHeadTest, LimitsGive414And431EvenBeforeTheHeadEnds) {
  HeadLimits limits;
  limits.max_target_bytes = 100;
  limits.max_head_bytes = 1000;
  EXPECT_EQ(RejectStatus("GET /" + std::string(200, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", limits),
            414);
  EXPECT_EQ(RejectStatus("GET /" + std::string(200, 'a'), limits), 414);  // still arriving
  EXPECT_EQ(RejectStatus("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'), limits), 431);
}

RequestHead HeadWith(std::vector<std::pair<std::string, std::string>> headers) {
  RequestHead head;
  head.method = "POST";
  head.headers = std::move(headers);
  return head;
}

TEST(DecideBodyFramingTest, LengthChunkedNoneAndTheAmbiguousCases) {
  BodyFraming f;
  EXPECT_FALSE(DecideBodyFraming(HeadWith({}), 100, &f));
  EXPECT_EQ(f.kind, BodyFraming::kNone);
  EXPECT_FALSE(DecideBodyFraming(HeadWith({{"content-length", "42"}}), 100, &f));
  EXPECT_EQ(f.kind, BodyFraming::kLength);
  EXPECT_EQ(f.length, 42u);
  EXPECT_FALSE(DecideBodyFraming(HeadWith({{"transfer-encoding", "Chunked"}}), 100, &f));
  EXPECT_EQ(f.kind, BodyFraming::kChunked);

  EXPECT_EQ(DecideBodyFraming(HeadWith({{"content-length", "101"}}), 100, &f)->status, 413);
  EXPECT_EQ(DecideBodyFraming(HeadWith({{"content-length", "-1"}}), 100, &f)->status, 400);
  EXPECT_EQ(DecideBodyFraming(HeadWith({{"content-length", "1x"}}), 100, &f)->status, 400);
  EXPECT_EQ(
      DecideBodyFraming(HeadWith({{"content-length", "1"}, {"content-length", "2"}}), 100, &f)
          ->status,
      400);
  EXPECT_EQ(DecideBodyFraming(
                HeadWith({{"content-length", "1"}, {"transfer-encoding", "chunked"}}), 100, &f)
                ->status,
            400);
  EXPECT_EQ(DecideBodyFraming(HeadWith({{"transfer-encoding", "gzip"}}), 100, &f)->status, 501);
}

TEST(WantsKeepAliveTest, FollowsTheVersionAndConnectionHeader) {
  RequestHead h11 = HeadWith({});
  EXPECT_TRUE(WantsKeepAlive(h11));
  h11.headers = {{"connection", "Close"}};
  EXPECT_FALSE(WantsKeepAlive(h11));
  RequestHead h10 = HeadWith({});
  h10.minor_version = 0;
  EXPECT_FALSE(WantsKeepAlive(h10));
  h10.headers = {{"connection", "foo, Keep-Alive"}};
  EXPECT_TRUE(WantsKeepAlive(h10));
}

TEST(ChunkedBodyDecoderTest, DecodesAcrossArbitrarySplits) {
  const std::string wire = "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t step = 1; step <= wire.size(); ++step) {
    ChunkedBodyDecoder decoder(100);
    std::string body;
    size_t offset = 0;
    std::string pending;
    while (!decoder.done() && offset < wire.size()) {
      pending += wire.substr(offset, step);
      offset += step;
      const size_t used = decoder.Feed(pending, &body);
      pending.erase(0, used);
      ASSERT_FALSE(decoder.error()) << decoder.error()->message;
    }
    ASSERT_TRUE(decoder.done()) << "step " << step;
    EXPECT_EQ(body, "hello, world");
    EXPECT_EQ(pending + wire.substr(std::min(offset, wire.size())), "NEXT") << "step " << step;
  }
}

TEST(ChunkedBodyDecoderTest, RejectsBadSizesOverlongDataAndTheLimit) {
  std::string body;
  ChunkedBodyDecoder bad_size(100);
  bad_size.Feed("zz\r\n", &body);
  EXPECT_EQ(bad_size.error()->status, 400);
  ChunkedBodyDecoder overlong(100);
  overlong.Feed("2\r\nabc\r\n", &body);
  EXPECT_EQ(overlong.error()->status, 400);
  ChunkedBodyDecoder too_large(10);
  body.clear();
  too_large.Feed("8\r\n12345678\r\n8\r\n", &body);
  ASSERT_TRUE(too_large.error());
  EXPECT_EQ(too_large.error()->status, 413);
}

std::string Gzip(const std::string& data) {
  z_stream s{};
  deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&s, data.size()) + 32, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

TEST(DecodeContentTest, GzipWithinAndOverTheLimitUnknownEncodingsAndGarbage) {
  const std::string plain(5000, 'a');
  std::string body = Gzip(plain);
  RequestHead gz = HeadWith({{"content-encoding", "gzip"}});
  EXPECT_FALSE(DecodeContent(gz, 10000, &body));
  EXPECT_EQ(body, plain);

  body = Gzip(plain);
  auto error = DecodeContent(gz, 1000, &body);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 413);

  body = "not gzip at all";
  error = DecodeContent(gz, 1000, &body);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 400);

  body = Gzip(plain).substr(0, 10);  // truncated stream
  error = DecodeContent(gz, 10000, &body);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 400);

  body = "x";
  error = DecodeContent(HeadWith({{"content-encoding", "br"}}), 1000, &body);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 415);
  EXPECT_NE(error->message.find("'br'"), std::string::npos);
  EXPECT_FALSE(DecodeContent(HeadWith({{"content-encoding", "identity"}}), 1000, &body));
  EXPECT_EQ(body, "x");
}

TEST(PercentDecodeTest, EscapesPlusAndBrokenEscapes) {
  EXPECT_EQ(PercentDecode("a%2Fb+c", false), "a/b+c");
  EXPECT_EQ(PercentDecode("a%2Fb+c", true), "a/b c");
  EXPECT_EQ(PercentDecode("%4", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%g0", false), std::nullopt);
}

}  // namespace
}  // namespace somm::http
