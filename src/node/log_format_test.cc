#include "node/log_format.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <string>

namespace somm::node {
namespace {

// What one message looks like through a logger using `format`.
std::string Logged(const std::string& format, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("somm", sink);
  logger.set_formatter(MakeLogFormatter(format));
  logger.warn(message);
  logger.flush();
  return out.str();
}

TEST(LogFormatTest, JsonIsOneObjectPerLineWithTheTextFormsFields) {
  const std::string message = "model \"digits\" said\n\tback\\slash \x01 and üñí";
  const std::string line = Logged("json", message);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["message"], message);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "somm");
  const std::string time = j["time"];
  ASSERT_EQ(time.size(), 24u) << time;  // 2026-11-29T01:02:03.456Z
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time.back(), 'Z');

  // The text form carries the same four fields.
  const std::string text = Logged("text", "plain message");
  EXPECT_EQ(text.rfind("[" + time.substr(0, 4), 0), 0u) << text;  // the same year
  EXPECT_NE(text.find("Z] [somm] [warning] plain message\n"), std::string::npos) << text;
}

TEST(LogFormatTest, OnlyTextAndJsonAreAccepted) {
  EXPECT_TRUE(CheckLogFormat("text").ok());
  EXPECT_TRUE(CheckLogFormat("json").ok());
  const Status s = CheckLogFormat("xml");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("text or json"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace somm::node
