#include "registry/published_model.h"

#include <gtest/gtest.h>

namespace somm {
namespace {

constexpr char kYaml[] = R"(max_batch_size: 8
inputs: [{name: pixels, datatype: FP32, shape: [64]}]
outputs: [{name: logits, datatype: FP32, shape: [10]}]
)";

PublishedModel Sample() {
  auto v = std::make_shared<VersionRecord>();
  v->version = 2;
  v->path = "repo/digits-mlp/2/model.pt";
  VariantProfile p;
  p.model = "digits-mlp";
  p.version = 2;
  p.variant = "ts-int8";
  p.precision = "int8";
  p.accuracy = 0.93;
  HardwareProfile hw;
  hw.hardware.threads = 2;
  hw.latency = LatencyCurve::Fit({{1, 0.2}, {8, 0.9}});
  hw.peak_memory_mb = 3.5;
  hw.load_time_ms = 40;
  p.hardware.push_back(hw);
  v->profiles.push_back(p);
  PublishedModel m;
  m.name = "digits-mlp";
  m.config_yaml = kYaml;
  m.versions.push_back(v);
  m.problems.push_back({"digits-mlp", "3", "UNAVAILABLE", "3/model.pt: no such file"});
  return m;
}

TEST(PublishedModelTest, RoundTripKeepsConfigVersionsProfilesAndProblems) {
  auto back = PublishedModelFromJson(PublishedModelToJson(Sample()), "digits-mlp");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->versions.size(), 1u);
  const VersionRecord& v = *back->versions[0];
  EXPECT_EQ(v.config.name, "digits-mlp");  // named by the catalog, as a folder names it
  EXPECT_EQ(v.config.max_batch_size, 8);
  EXPECT_EQ(v.version, 2);
  EXPECT_EQ(v.version_str, "2");
  EXPECT_EQ(v.path, "repo/digits-mlp/2/model.pt");
  ASSERT_EQ(v.profiles.size(), 1u);
  EXPECT_EQ(v.profiles[0].variant, "ts-int8");
  ASSERT_TRUE(v.profiles[0].accuracy.has_value());
  EXPECT_DOUBLE_EQ(*v.profiles[0].accuracy, 0.93);
  const HardwareProfile* hw = v.profiles[0].For(Sample().versions[0]->profiles[0].hardware[0].hardware);
  ASSERT_NE(hw, nullptr);
  EXPECT_NEAR(hw->latency.Predict(8), 0.9, 1e-9);
  ASSERT_EQ(back->problems.size(), 1u);
  EXPECT_EQ(back->problems[0].reason, "3/model.pt: no such file");
}

TEST(PublishedModelTest, AModelWithOnlyProblemsNeedsNoParsableConfig) {
  PublishedModel m;
  m.name = "broken";
  m.config_yaml = "inputs: [{name: x, datatype: FLOAT}]";
  m.problems.push_back({"broken", "", "UNAVAILABLE", "datatype FLOAT is not known"});
  auto back = PublishedModelFromJson(PublishedModelToJson(m), "broken");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->versions.empty());
  ASSERT_EQ(back->problems.size(), 1u);
}

TEST(PublishedModelTest, GarbageAndAConfigNamingAnotherModelAreRefusedByName) {
  auto garbage = PublishedModelFromJson("{not json", "digits-mlp");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("digits-mlp"), std::string::npos);
  PublishedModel m = Sample();
  m.config_yaml = std::string("name: other\n") + kYaml;
  auto other = PublishedModelFromJson(PublishedModelToJson(m), "digits-mlp");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("other"), std::string::npos);
  auto missing = PublishedModelFromJson(R"({"config_yaml": "x"})", "digits-mlp");
  EXPECT_FALSE(missing.ok());
}

// A private model's options carry its instance_count as the autoscaler's
// ceiling: its owner's memory quota is charged for that many instances.
TEST(VersionOptionsTest, APrivateModelsOptionsAreCappedAtItsChargedInstances) {
  PublishedModel m = Sample();
  auto v = std::make_shared<VersionRecord>(*m.versions[0]);
  v->config.name = "digits-mlp";
  v->config.instance_count = 3;
  std::vector<cluster::VariantOption> options;
  AppendOptions(*v, &options);
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].max_replicas, 0);  // public: no ceiling
  v->config.owner_tenant = "team-a";
  options.clear();
  AppendOptions(*v, &options);
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].max_replicas, 3);
}

}  // namespace
}  // namespace somm
