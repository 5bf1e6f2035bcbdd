#include "loadgen/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace somm::loadgen {
namespace {

using ::testing::HasSubstr;

TEST(TraceTest, ParsesAllColumnsInAnyOrder) {
  const auto trace = ParseTraceCsv(
      "model,timestamp_ms,latency_slo_ms,task,min_accuracy,max_cost\n"
      "digits-cnn,0,50,classification/digits,0.95,1.5\n"
      ",2.5,,,,\n"
      "digits-mlp,2.5,10,,,\n",
      "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->queries.size(), 3u);
  const TraceQuery& a = trace->queries[0];
  EXPECT_EQ(a.model, "digits-cnn");
  EXPECT_EQ(a.task, "classification/digits");
  EXPECT_DOUBLE_EQ(a.timestamp_ms, 0);
  EXPECT_EQ(a.latency_slo_ms, 50.0);
  EXPECT_EQ(a.min_accuracy, 0.95);
  EXPECT_EQ(a.max_cost, 1.5);
  EXPECT_EQ(a.line, 2);
  const TraceQuery& b = trace->queries[1];
  EXPECT_EQ(b.model, "");
  EXPECT_DOUBLE_EQ(b.timestamp_ms, 2.5);
  EXPECT_FALSE(b.latency_slo_ms.has_value());
  EXPECT_FALSE(b.min_accuracy.has_value());
  EXPECT_EQ(trace->queries[2].latency_slo_ms, 10.0);
}

TEST(TraceTest, TimestampAloneCrlfAndBlankLines) {
  const auto trace = ParseTraceCsv("timestamp_ms\r\n0\r\n\r\n1\r\n 7.25 \r\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->queries.size(), 3u);
  EXPECT_DOUBLE_EQ(trace->queries[2].timestamp_ms, 7.25);
  EXPECT_EQ(trace->queries[2].line, 5);
}

// Each malformed input and the words its error must contain.
struct Malformed {
  const char* text;
  std::vector<const char*> words;
};

TEST(TraceTest, MalformedRowsNameLineAndColumn) {
  const std::vector<Malformed> cases = {
      {"timestamp_ms,latency_slo_ms\n0,5\n1,fast\n",
       {"t.csv:3:", "column 2 (latency_slo_ms)", "'fast' is not a number"}},
      {"timestamp_ms,model\n0,a\n1\n", {"t.csv:3:", "has 1 cells", "header has 2"}},
      {"timestamp_ms,model\n0,a,b\n", {"t.csv:2:", "has 3 cells"}},
      {"model,timestamp_ms\na,\n", {"t.csv:2:", "column 2 (timestamp_ms)", "empty"}},
      {"timestamp_ms\n5\n4\n", {"t.csv:3:", "column 1 (timestamp_ms)", "must not decrease"}},
      {"timestamp_ms\n-1\n", {"t.csv:2:", "negative"}},
      {"timestamp_ms\n1e999\n", {"t.csv:2:", "not a number"}},
      {"timestamp_ms,max_cost\n0,\"1\"\n", {"t.csv:2:", "column 2 (max_cost)", "quoted"}},
      {"model,latency_slo_ms\na,1\n", {"t.csv:1:", "lacks the required column 'timestamp_ms'"}},
      {"timestamp_ms,latency_slo\n0,1\n", {"t.csv:1:", "header column 2 'latency_slo'"}},
      {"timestamp_ms,model,model\n", {"t.csv:1:", "twice"}},
      {"timestamp_ms\n", {"t.csv", "no queries"}},
      {"\n\n", {"t.csv", "empty trace"}},
  };
  for (const Malformed& c : cases) {
    const auto trace = ParseTraceCsv(c.text, "t.csv");
    ASSERT_FALSE(trace.ok()) << c.text;
    EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument) << c.text;
    for (const char* word : c.words) {
      EXPECT_THAT(trace.status().message(), HasSubstr(word)) << c.text;
    }
  }
}

TEST(TraceTest, MissingFileIsNotFound) {
  const auto trace = LoadTraceCsv("/nonexistent/trace.csv");
  EXPECT_EQ(trace.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(trace.status().message(), HasSubstr("/nonexistent/trace.csv"));
}

}  // namespace
}  // namespace somm::loadgen
