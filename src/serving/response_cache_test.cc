#include "serving/response_cache.h"

#include <gtest/gtest.h>

#include <cstring>

namespace somm {
namespace {

Tensor Pixels(float value) {
  Tensor t{"pixels", DataType::kFp32, {1, 4}, std::string(16, '\0')};
  std::memcpy(t.data.data(), &value, sizeof value);
  return t;
}

InferenceResponse Answer(const std::string& model, size_t bytes) {
  InferenceResponse r;
  r.model_name = model;
  r.model_version = "1";
  r.outputs.push_back(Tensor{"logits", DataType::kFp32, {1}, std::string(bytes, 'x')});
  return r;
}

std::string Key(const std::string& model, float value, int64_t version = 1, uint64_t gen = 1) {
  return ResponseCache::KeyFor(model, version, gen, {Pixels(value)}, {});
}

TEST(ResponseCacheTest, KeyChangesWithEveryPartOfTheQuery) {
  const std::string base = Key("m", 1.0f);
  EXPECT_EQ(base, Key("m", 1.0f));
  EXPECT_NE(base, Key("m", 2.0f));
  EXPECT_NE(base, Key("n", 1.0f));
  EXPECT_NE(base, Key("m", 1.0f, 2));
  EXPECT_NE(base, Key("m", 1.0f, 1, 2));
  Tensor renamed = Pixels(1.0f);
  renamed.name = "image";
  EXPECT_NE(base, ResponseCache::KeyFor("m", 1, 1, {renamed}, {}));
  Tensor reshaped = Pixels(1.0f);
  reshaped.shape = {2, 2};
  EXPECT_NE(base, ResponseCache::KeyFor("m", 1, 1, {reshaped}, {}));
  EXPECT_NE(base, ResponseCache::KeyFor("m", 1, 1, {Pixels(1.0f)}, {RequestedOutput{"logits", {}}}));
}

TEST(ResponseCacheTest, HitsAndMissesAreCounted) {
  ResponseCache cache;
  EXPECT_FALSE(cache.Lookup("m", Key("m", 1.0f)).has_value());
  cache.Insert("m", Key("m", 1.0f), Answer("m", 10), 1 << 20);
  std::optional<InferenceResponse> hit = cache.Lookup("m", Key("m", 1.0f));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->outputs.at(0).data, std::string(10, 'x'));
  const ResponseCacheStats s = cache.Stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 1);
  EXPECT_GT(s.bytes, 10);
}

TEST(ResponseCacheTest, TheBoundEvictsTheLeastRecentlyUsedOfThatModelOnly) {
  ResponseCache cache;
  const int64_t one = cache.Stats().bytes;  // 0
  cache.Insert("other", Key("other", 9.0f), Answer("other", 1000), 1 << 20);
  cache.Insert("m", Key("m", 1.0f), Answer("m", 1000), 1 << 20);
  const int64_t entry = cache.StatsFor("m").bytes - one;
  const int64_t bound = 2 * entry + entry / 2;  // room for two entries
  cache.Insert("m", Key("m", 2.0f), Answer("m", 1000), bound);
  ASSERT_TRUE(cache.Lookup("m", Key("m", 1.0f)).has_value());  // 1 is now the most recent
  cache.Insert("m", Key("m", 3.0f), Answer("m", 1000), bound);
  EXPECT_TRUE(cache.Lookup("m", Key("m", 1.0f)).has_value());
  EXPECT_FALSE(cache.Lookup("m", Key("m", 2.0f)).has_value());
  EXPECT_TRUE(cache.Lookup("m", Key("m", 3.0f)).has_value());
  EXPECT_LE(cache.StatsFor("m").bytes, bound);
  EXPECT_EQ(cache.StatsFor("m").evictions, 1);
  EXPECT_TRUE(cache.Lookup("other", Key("other", 9.0f)).has_value());
  // An answer larger than the bound is not kept.
  cache.Insert("m", Key("m", 4.0f), Answer("m", 100000), bound);
  EXPECT_FALSE(cache.Lookup("m", Key("m", 4.0f)).has_value());
}

TEST(ResponseCacheTest, InvalidationDropsOnlyThatModel) {
  ResponseCache cache;
  cache.Insert("m", Key("m", 1.0f), Answer("m", 10), 1 << 20);
  cache.Insert("n", Key("n", 1.0f), Answer("n", 10), 1 << 20);
  cache.InvalidateModel("m");
  EXPECT_FALSE(cache.Lookup("m", Key("m", 1.0f)).has_value());
  EXPECT_TRUE(cache.Lookup("n", Key("n", 1.0f)).has_value());
  EXPECT_EQ(cache.StatsFor("m").bytes, 0);
  EXPECT_EQ(cache.Stats().entries, 1);
}

}  // namespace
}  // namespace somm
