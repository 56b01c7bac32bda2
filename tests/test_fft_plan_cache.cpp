// The backend-neutral LRU plan cache, driven by a fake plan factory.
#include <gtest/gtest.h>

#include <memory>

#include "ember/errors.h"
#include "fft/plan_cache.h"

namespace {

using ember::detail::fft::Plan;
using ember::detail::fft::PlanCache;
using ember::detail::fft::PlanFactory;
using ember::detail::fft::PlanKey;

// Counts plans made and alive, so tests can see creation, reuse and destruction.
struct CountingFactory : PlanFactory {
  struct CountedPlan : Plan {
    CountedPlan(PlanKey key, int* alive) : Plan(std::move(key)), alive_(alive) { ++*alive_; }
    ~CountedPlan() override { --*alive_; }
    int* alive_;
  };
  std::shared_ptr<const Plan> create(const PlanKey& key, int device) override {
    ++created;
    last_device = device;
    return std::make_shared<CountedPlan>(key, &alive);
  }
  int created = 0;
  int alive = 0;
  int last_device = -2;
};

PlanKey key_of(int64_t n, bool forward = true) {
  PlanKey key;
  key.signal_sizes = {n};
  key.in_strides = key.out_strides = {1};
  key.batch = 1;
  key.in_dist = key.out_dist = n;
  key.forward = forward;
  return key;
}

TEST(PlanCache, HitsReusePlansAndMissesMakeThem) {
  CountingFactory factory;
  PlanCache cache(3, factory);
  EXPECT_EQ(cache.max_size(), 4096);
  auto a = cache.get(key_of(8));
  EXPECT_EQ(factory.last_device, 3);
  auto b = cache.get(key_of(8));
  EXPECT_EQ(a, b);
  EXPECT_EQ(cache.plans_created(), 1);
  EXPECT_EQ(cache.size(), 1);
  // Every part of the key counts: direction, precision, kind, batch, layout.
  PlanKey other = key_of(8, /*forward=*/false);
  cache.get(other);
  other = key_of(8);
  other.precision = ember::kFloat64;
  cache.get(other);
  other = key_of(8);
  other.kind = ember::detail::fft::TransformKind::R2C;
  cache.get(other);
  other = key_of(8);
  other.batch = 2;
  cache.get(other);
  other = key_of(8);
  other.in_strides = {2};
  cache.get(other);
  EXPECT_EQ(cache.size(), 6);
  EXPECT_EQ(factory.created, 6);
}

TEST(PlanCache, LoweringMaxSizeEvictsLeastRecentlyUsed) {
  CountingFactory factory;
  PlanCache cache(0, factory);
  for (int64_t n : {1, 2, 3, 4}) cache.get(key_of(n));
  cache.get(key_of(1));  // 1 is now the most recently used; 2 the least
  cache.set_max_size(2);
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(factory.alive, 2);
  const int64_t before = cache.plans_created();
  cache.get(key_of(1));
  cache.get(key_of(4));
  EXPECT_EQ(cache.plans_created(), before);  // 1 and 4 survived
  cache.get(key_of(2));                      // 2 was evicted: made again, evicting 1 (LRU)
  EXPECT_EQ(cache.plans_created(), before + 1);
  cache.get(key_of(4));
  EXPECT_EQ(cache.plans_created(), before + 1);
  cache.get(key_of(1));
  EXPECT_EQ(cache.plans_created(), before + 2);
}

TEST(PlanCache, MaxSizeZeroStillHandsOutPlans) {
  CountingFactory factory;
  PlanCache cache(0, factory);
  cache.get(key_of(5));
  cache.set_max_size(0);
  EXPECT_EQ(cache.size(), 0);
  auto a = cache.get(key_of(5));
  auto b = cache.get(key_of(5));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(cache.plans_created(), 3);
}

TEST(PlanCache, EvictedPlansLiveWhileHeld) {
  CountingFactory factory;
  PlanCache cache(0, factory);
  std::shared_ptr<const Plan> held = cache.get(key_of(7));  // as a queued KernelCall payload holds it
  cache.clear();
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(factory.alive, 1);
  EXPECT_EQ(held->key(), key_of(7));
  held.reset();
  EXPECT_EQ(factory.alive, 0);
}

TEST(PlanCache, NegativeMaxSizeIsAValueErrorAndKeepsTheCache) {
  CountingFactory factory;
  PlanCache cache(0, factory);
  cache.set_max_size(10);
  cache.get(key_of(3));
  try {
    cache.set_max_size(-1);
    FAIL();
  } catch (const ember::ValueError& e) {
    EXPECT_STREQ(e.what(), "cuFFT plan cache size must be non-negative, but got -1");
  }
  EXPECT_EQ(cache.max_size(), 10);
  EXPECT_EQ(cache.size(), 1);
}

TEST(PlanCache, GrowingPastMaxSizeEvictsOldest) {
  CountingFactory factory;
  PlanCache cache(0, factory);
  cache.set_max_size(3);
  for (int64_t n = 1; n <= 10; ++n) cache.get(key_of(n));
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(factory.alive, 3);
  const int64_t before = cache.plans_created();
  for (int64_t n : {8, 9, 10}) cache.get(key_of(n));
  EXPECT_EQ(cache.plans_created(), before);
}

}  // namespace
