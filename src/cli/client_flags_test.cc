#include "cli/client_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace somm {
namespace {

// Parses `args` (after the program name) into `app`; "" on success, else
// CLI11's message.
std::string Parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<const char*> argv = {"somm"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ClientFlagsTest, EveryClientFlagIsAddedAndFillsTheOptions) {
  CLI::App app;
  ClientOptions o;
  AddClientFlags(&app, &o);
  const std::string ca = std::string(SOMM_SOURCE_DIR) + "/README.md";  // any existing file
  ASSERT_EQ(Parse(app, {"-u", "https://localhost:9443", "-i", "grpc", "--api-key", "k1",
                        "--tls-ca", ca, "--tls-cert", ca, "--tls-key", ca}),
            "");
  EXPECT_EQ(o.url, "https://localhost:9443");
  EXPECT_EQ(o.protocol, "grpc");
  EXPECT_EQ(o.api_key, "k1");
  EXPECT_EQ(o.tls.ca_file, ca);
  EXPECT_EQ(o.tls.cert_file, ca);
  EXPECT_EQ(o.tls.key_file, ca);
  const std::string help = app.help();
  for (const char* flag : {"--url", "-u", "--protocol", "-i", "--api-key", "--tls-ca",
                           "--tls-cert", "--tls-key"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  CLI::App other;
  ClientOptions p;
  AddClientFlags(&other, &p);
  EXPECT_NE(Parse(other, {"-i", "websocket"}), "");
  EXPECT_NE(Parse(other, {"--tls-ca", "/no/such/ca.pem"}), "");
}

TEST(ClientFlagsTest, DurationsCarryTheirUnit) {
  EXPECT_DOUBLE_EQ(ParseDurationFlag("250ms").value(), 0.25);
  EXPECT_DOUBLE_EQ(ParseDurationFlag("2s").value(), 2);
  EXPECT_DOUBLE_EQ(ParseDurationFlag("1.5m").value(), 90);
  EXPECT_DOUBLE_EQ(ParseDurationFlag("1h").value(), 3600);
  EXPECT_DOUBLE_EQ(ParseDurationFlag("500us").value(), 0.0005);
  for (const char* bad : {"2", "", "s", "-1s", "2 s", "2sec", "1d", "nan", "infs"}) {
    EXPECT_FALSE(ParseDurationFlag(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatDurationFlag(2), "2s");
  EXPECT_EQ(FormatDurationFlag(0.25), "250ms");
  EXPECT_EQ(FormatDurationFlag(120), "2m");
  EXPECT_EQ(FormatDurationFlag(1.5), "1500ms");
}

TEST(ClientFlagsTest, ADurationFlagFillsItsUnitAndChecksItsRange) {
  double interval_ms = 2000;
  CLI::App app;
  AddDurationFlag(&app, "--interval", &interval_ms, 1e-3, "refresh", 0.2, 3600);
  EXPECT_NE(app.help().find("DURATION=2s"), std::string::npos) << app.help();
  ASSERT_EQ(Parse(app, {"--interval", "1.5s"}), "");
  EXPECT_DOUBLE_EQ(interval_ms, 1500);
  double again = 2000;
  CLI::App app2;
  AddDurationFlag(&app2, "--interval", &again, 1e-3, "refresh", 0.2, 3600);
  EXPECT_NE(Parse(app2, {"--interval", "100ms"}), "");  // below the floor
  CLI::App app3;
  AddDurationFlag(&app3, "--interval", &again, 1e-3, "refresh", 0.2, 3600);
  EXPECT_NE(Parse(app3, {"--interval", "1500"}), "");  // no unit
}

TEST(ClientFlagsTest, HiddenAliasesWorkButStayOutOfHelp) {
  std::string version;
  double interval_ms = 2000;
  CLI::App app;
  app.add_option("--model-version", version, "the version");
  AddHiddenAlias(&app, "--version", &version);
  AddDurationFlag(&app, "--interval", &interval_ms, 1e-3, "refresh");
  AddHiddenAlias(&app, "--interval-ms", &interval_ms);
  ASSERT_EQ(Parse(app, {"--version", "3", "--interval-ms", "750"}), "");
  EXPECT_EQ(version, "3");
  EXPECT_DOUBLE_EQ(interval_ms, 750);
  const std::string help = app.help();
  EXPECT_NE(help.find("--model-version"), std::string::npos);
  EXPECT_EQ(help.find("--version "), std::string::npos) << help;
  EXPECT_EQ(help.find("--interval-ms"), std::string::npos) << help;
}

TEST(ClientTargetTest, UrlFormsAndWhatTheyImply) {
  ClientOptions o;
  ClientTarget t = ResolveClientTarget(o).value();
  EXPECT_EQ(t.host_port, "127.0.0.1:8000");
  EXPECT_FALSE(t.tls);
  o.protocol = "grpc";
  EXPECT_EQ(ResolveClientTarget(o)->host_port, "127.0.0.1:8001");

  o = {"https://localhost:9443/", "http"};
  t = ResolveClientTarget(o).value();
  EXPECT_EQ(t.host, "localhost");
  EXPECT_EQ(t.port, 9443);
  EXPECT_TRUE(t.tls);  // https:// alone: the system's trust store
  o.tls.ca_file = "ca.pem";
  o.url = "localhost:9443";
  EXPECT_TRUE(ResolveClientTarget(o)->tls);  // --tls-ca alone implies it
  o.url = "http://localhost:9443";
  EXPECT_FALSE(ResolveClientTarget(o).ok());  // http:// and --tls-ca contradict

  o = {"https://[::1]:8001", "grpc"};
  EXPECT_FALSE(ResolveClientTarget(o).ok());  // TLS over gRPC needs --tls-ca
  o.tls.ca_file = "ca.pem";
  t = ResolveClientTarget(o).value();
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.host_port, "[::1]:8001");

  for (const char* bad : {"localhost", "localhost:0", "localhost:70000", "::1:8000",
                          "ftp://h:1", "h:12x", ":8000"}) {
    o = {bad, "http"};
    EXPECT_FALSE(ResolveClientTarget(o).ok()) << bad;
  }
  o = {"h:1", "http"};
  o.tls.cert_file = "client.pem";  // a certificate with no key
  EXPECT_FALSE(ResolveClientTarget(o).ok());
}

}  // namespace
}  // namespace somm
