#include "sandbox/sandbox_wire.h"

#include <gtest/gtest.h>

#include <vector>

namespace somm::sandbox_wire {
namespace {

TEST(SandboxWireTest, RequestsRoundTrip) {
  ProbeRequest p;
  p.model_name = "m";
  p.model_dir = "/r/.somm/staging/1-0/m";
  p.version = 3;
  p.device = Device{DeviceKind::kCuda, 1};
  auto probe = DecodeProbe(EncodeProbe(p));
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(probe->model_name, "m");
  EXPECT_EQ(probe->model_dir, p.model_dir);
  EXPECT_EQ(probe->version, 3);
  EXPECT_EQ(probe->device.ToString(), "cuda:1");

  VariantJobRequest v;
  v.config.name = "m";
  v.version = 2;
  v.model_dir = "/r/m";
  v.private_files = true;
  v.options.variants_root = "/r/.somm/variants";
  v.options.hardware = {{DeviceKind::kCpu, 0, 1}, {DeviceKind::kCuda, 0, 1}};
  v.options.tools_dir = "/t";
  v.options.profile_batches = {1, 8};
  auto job = DecodeVariantJob(EncodeVariantJob(v));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->config.name, "m");
  EXPECT_EQ(job->version, 2);
  EXPECT_TRUE(job->private_files);
  EXPECT_EQ(job->options.variants_root, v.options.variants_root);
  EXPECT_EQ(job->options.hardware, v.options.hardware);
  EXPECT_EQ(job->options.profile_batches, v.options.profile_batches);
  EXPECT_EQ(job->options.tools_dir, "/t");
  EXPECT_EQ(DecodeProbe("{").status().code(), StatusCode::kInvalidArgument);
}

TEST(SandboxWireTest, AnswerLinesRoundTrip) {
  auto line = ParseChildLine(ProgressLine(VariantProgress{"profile", 2, 9, "ts-opt on cpu1"}));
  ASSERT_TRUE(line.ok() && line->progress);
  EXPECT_EQ(line->progress->done, 2);
  EXPECT_EQ(line->progress->current, "ts-opt on cpu1");
  line = ParseChildLine(ResultLine(InvalidArgument("bad \xff shape"), false, {"w"}));
  ASSERT_TRUE(line.ok() && line->result);
  EXPECT_EQ(line->result->status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(line->result->warnings, std::vector<std::string>{"w"});
  line = ParseChildLine(ResultLine(Status::Ok(), false, {}, int64_t{300} << 20));
  ASSERT_TRUE(line.ok() && line->result);
  EXPECT_TRUE(line->result->status.ok());
  EXPECT_EQ(line->result->peak_memory_bytes, int64_t{300} << 20);
  line = ParseChildLine(ConfinementLine("rlimits"));
  ASSERT_TRUE(line.ok() && line->confinement);
  EXPECT_EQ(*line->confinement, "rlimits");
  EXPECT_TRUE(LooksLikeOutOfMemory("DefaultCPUAllocator: can't allocate memory: you tried"));
  EXPECT_FALSE(LooksLikeOutOfMemory("shape mismatch"));
}

// What a probe reports: the resident-set peak since the mark, over what
// the process held at it, so memory written and freed again counts.
TEST(PeakMemoryMarkTest, CountsWhatWasWrittenSinceTheMarkEvenIfFreed) {
  const PeakMemoryMark mark = PeakMemoryMark::Begin();
  {
    std::vector<char> scratch(size_t{96} << 20);
    for (size_t i = 0; i < scratch.size(); i += 4096) scratch[i] = 1;
  }
  const int64_t added = mark.AddedBytes();
  EXPECT_GE(added, int64_t{90} << 20);
#if !defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer its shadow of what was written is resident too
  // (about five times the writes here): only the floor holds there.
  EXPECT_LT(added, int64_t{200} << 20);
#endif
}

}  // namespace
}  // namespace somm::sandbox_wire
