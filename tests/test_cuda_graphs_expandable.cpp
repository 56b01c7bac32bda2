// CUDA graphs' private pools with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on an
// emulated device: a pool lives until its last block is freed (Note [Graph private pools]),
// and once every graph and tensor is gone, empty_cache gives all of its memory back.
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/ember.h"

namespace cuda = ember::cuda;
using ember::Tensor;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);  // read once, at the first allocator
  cuda::emulate(1, 512 * MiB);
  return true;
}();

ember::TensorOptions on0() { return ember::TensorOptions().device(ember::Device(ember::kCUDA, 0)); }

int64_t stat(const char* key) { return cuda::memory_stats(0).at(key); }

size_t segments_of(cuda::MempoolId pool) {
  size_t found = 0;
  const nlohmann::json snapshot = nlohmann::json::parse(cuda::memory_snapshot_json());
  for (const auto& segment : snapshot["segments"])
    if (segment["segment_pool_id"][0].get<uint64_t>() == pool.first &&
        segment["segment_pool_id"][1].get<uint64_t>() == pool.second)
      ++found;
  return found;
}

class ExpandableGraphPools : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEmulated);
    cuda::synchronize();
    cuda::empty_cache();
    baseline_reserved_ = stat("reserved_bytes.all.current");
  }
  // Everything freed: the device's cache and every private pool go back.
  void expect_all_returned() {
    cuda::synchronize();
    cuda::empty_cache();
    EXPECT_EQ(stat("allocated_bytes.all.current"), 0);
    EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);
  }
  int64_t baseline_reserved_ = 0;
};

// The case: the graph is gone, its output is not; the guard's and the user's
// empty_cache must leave the pool's segment (and the output's block) alone.
TEST_F(ExpandableGraphPools, AnOutputKeptPastItsGraphSurvivesEmptyCache) {
  Tensor x = ember::ones({1 << 20}, on0());
  Tensor keep;
  cuda::MempoolId pool;
  {
    cuda::CUDAGraph g;
    {
      cuda::graph capture(g);
      keep = x * 2.0;
    }
    pool = g.pool();
    g.replay();
  }
  cuda::empty_cache();
  EXPECT_EQ(segments_of(pool), 1u);  // the output's block keeps it
  EXPECT_EQ(keep.sum().item<float>(), 2.0f * (1 << 20));
  Tensor other = x * 5.0;  // an ordinary allocation never lands in the dead graph's pool
  EXPECT_EQ(other.sum().item<float>(), 5.0f * (1 << 20));
  keep = Tensor();
  other = Tensor();
  x = Tensor();
  expect_all_returned();
  EXPECT_EQ(segments_of(pool), 0u);
}

// Two guarded captures in a row: the second guard's empty_cache ran under the first
// graph's kept output.
TEST_F(ExpandableGraphPools, TwoCapturesInARowKeepTheFirstOutput) {
  Tensor x = ember::ones({1 << 20}, on0());
  Tensor first, second;
  {
    cuda::CUDAGraph g1, g2;
    {
      cuda::graph capture(g1);
      first = x * 2.0;
    }
    g1.reset();
    {
      cuda::graph capture(g2);
      second = x * 3.0;
    }
    g2.replay();
  }
  EXPECT_EQ(second.sum().item<float>(), 3.0f * (1 << 20));
  first = Tensor();
  second = Tensor();
  x = Tensor();
  expect_all_returned();
}

// Graphs sharing one pool: it lives while either graph does, then returns everything,
// small blocks included (2 MiB stayed reserved for good).
TEST_F(ExpandableGraphPools, ASharedPoolReturnsAllItsMemoryAfterTheLastGraph) {
  Tensor x = ember::ones({4096}, on0());
  const cuda::MempoolId handle = cuda::graph_pool_handle();
  Tensor a, b;
  {
    cuda::CUDAGraph h1, h2;
    {
      cuda::graph capture(h1, handle);
      a = x + 1.0;
    }
    {
      cuda::graph capture(h2, handle);
      b = x + 2.0;
    }
    h1.replay();
    h2.replay();
    EXPECT_EQ(segments_of(handle), 1u);
    h1.reset();
    a = Tensor();
    cuda::synchronize();
    cuda::empty_cache();
    EXPECT_EQ(segments_of(handle), 1u);  // h2 still uses the pool
    EXPECT_EQ(b.sum().item<float>(), 3.0f * 4096);
  }
  b = Tensor();
  x = Tensor();
  expect_all_returned();
  EXPECT_EQ(segments_of(handle), 0u);
}

}  // namespace
