#include "dashboard/static_files.h"

#include <gtest/gtest.h>

#include <string>

namespace somm::dashboard {
namespace {

std::string Header(const http::Response& res, const std::string& name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(StaticFilesTest, ServesTheEmbeddedPages) {
  const http::Response index = ServeDashboard("GET", "/dashboard/");
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("<html"), std::string::npos);
  EXPECT_EQ(Header(index, "Content-Type"), "text/html; charset=utf-8");
  // Every script the index names is embedded too.
  for (const char* name : {"dashboard.js", "dashboard.css"}) {
    EXPECT_NE(index.body.find(name), std::string::npos) << name;
    const http::Response file = ServeDashboard("GET", std::string("/dashboard/") + name);
    EXPECT_EQ(file.status, 200) << name;
    EXPECT_EQ(file.body, std::string(FindStaticFile(name)->body));
  }
}

TEST(StaticFilesTest, RedirectsUnknownFilesAndMethods) {
  const http::Response bare = ServeDashboard("GET", "/dashboard");
  EXPECT_EQ(bare.status, 302);
  EXPECT_EQ(Header(bare, "Location"), "/dashboard/");
  EXPECT_EQ(ServeDashboard("GET", "/dashboard/nope.js").status, 404);
  EXPECT_EQ(ServeDashboard("POST", "/dashboard/").status, 405);
  EXPECT_TRUE(IsDashboardPath("/dashboard"));
  EXPECT_TRUE(IsDashboardPath("/dashboard/x.js"));
  EXPECT_FALSE(IsDashboardPath("/dashboards"));
  EXPECT_FALSE(IsDashboardPath("/v2/dashboard"));
}

}  // namespace
}  // namespace somm::dashboard
