// CUDA graphs' private memory pools on an emulated device: routing of a capture's
// allocations, reuse in capture order, sharing between graphs, statistics and snapshots,
// and the return of a pool's memory once no graph uses it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"

namespace cuda = ember::cuda;
using ember::Tensor;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  cuda::emulate(1, 512 * MiB);
  return true;
}();

ember::TensorOptions on0() { return ember::TensorOptions().device(ember::Device(ember::kCUDA, 0)); }

int64_t stat(const char* key) { return cuda::memory_stats(0).at(key); }

// The snapshot's segments of `pool`.
std::vector<nlohmann::json> segments_of(cuda::MempoolId pool) {
  std::vector<nlohmann::json> found;
  const nlohmann::json snapshot = nlohmann::json::parse(cuda::memory_snapshot_json());
  for (const auto& segment : snapshot["segments"])
    if (segment["segment_pool_id"][0].get<uint64_t>() == pool.first &&
        segment["segment_pool_id"][1].get<uint64_t>() == pool.second)
      found.push_back(segment);
  return found;
}

class GraphPools : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEmulated);
    cuda::synchronize();
    cuda::empty_cache();
    baseline_reserved_ = stat("reserved_bytes.all.current");
    baseline_segments_ = stat("segment.all.current");
    side_.wait_stream(cuda::current_stream(0));
  }
  cuda::Stream side_{0};
  int64_t baseline_reserved_ = 0;
  int64_t baseline_segments_ = 0;
};

TEST_F(GraphPools, CaptureAllocationsComeFromThePrivatePoolUntilNoGraphUsesIt) {
  Tensor x = ember::ones({1024 * 1024}, on0());  // 4 MiB: a 20 MiB large-pool segment
  const int64_t with_input = stat("reserved_bytes.all.current");
  auto g = std::make_unique<cuda::CUDAGraph>();
  Tensor y;
  {
    cuda::StreamGuard guard(side_);
    g->capture_begin();
    y = x * 2.0;
    g->capture_end();
  }
  // The input's segment had room for y; the capture took a segment of its own instead
  // (and the graph a small one, before the capture, for its two Philox tensors).
  EXPECT_EQ(stat("reserved_bytes.all.current"), with_input + int64_t{22 * MiB});
  EXPECT_EQ(stat("segment.all.current"), baseline_segments_ + 3);
  std::vector<nlohmann::json> pool_segments = segments_of(g->pool());
  ASSERT_EQ(pool_segments.size(), 1u);
  EXPECT_EQ(pool_segments[0]["total_size"], 20 * MiB);
  EXPECT_EQ(pool_segments[0]["allocated_size"], 4 * MiB);
  g->replay();
  EXPECT_EQ(y.sum().item<float>(), 2.0f * 1024 * 1024);

  // Freed while the graph lives: the block stays in the pool, which empty_cache keeps.
  y = Tensor();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_EQ(segments_of(g->pool()).size(), 1u);
  EXPECT_EQ(stat("reserved_bytes.all.current"), with_input + int64_t{22 * MiB});
  // An ordinary allocation of the same size never lands in the pool.
  Tensor z = ember::empty({1024 * 1024}, on0());
  EXPECT_EQ(segments_of(g->pool())[0]["allocated_size"], 0);

  // Reset: no graph uses the pool, so empty_cache returns its segment.
  const cuda::MempoolId pool = g->pool();
  g.reset();  // the graph and its Philox tensors
  z = Tensor();
  x = Tensor();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_TRUE(segments_of(pool).empty());
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);
  EXPECT_EQ(stat("segment.all.current"), baseline_segments_);
}

TEST_F(GraphPools, BlocksFreedDuringCaptureAreReusedByTheSameCaptureOnly) {
  Tensor x = ember::ones({4096}, on0());
  cuda::CUDAGraph g;
  void* first = nullptr;
  void* second = nullptr;
  Tensor out;
  {
    cuda::StreamGuard guard(side_);
    g.capture_begin();
    Tensor temp = x * 3.0;
    first = temp.data_ptr();
    out = temp + 1.0;
    temp = Tensor();  // freed in capture order: after its last use
    Tensor again = x * 5.0;
    second = again.data_ptr();
    out += again;
    g.capture_end();
  }
  EXPECT_EQ(first, second);
  g.replay();
  EXPECT_EQ(out.sum().item<float>(), 9.0f * 4096);
  // After the capture, allocations on the same stream do not get the pool's free blocks.
  {
    cuda::StreamGuard guard(side_);
    Tensor outside = ember::empty({4096}, on0());
    EXPECT_NE(outside.data_ptr(), first);
  }
}

TEST_F(GraphPools, GraphsShareAPoolThroughPoolAndGraphPoolHandle) {
  Tensor x = ember::ones({4096}, on0());
  cuda::CUDAGraph g1, g2;
  void* first = nullptr;
  {
    cuda::StreamGuard guard(side_);
    g1.capture_begin();
    Tensor temp = x * 2.0;
    first = temp.data_ptr();
    g1.capture_end();
  }  // temp is freed into g1's pool
  Tensor y2;
  {
    cuda::StreamGuard guard(side_);
    g2.capture_begin(g1.pool());
    y2 = x * 7.0;
    g2.capture_end();
  }
  EXPECT_EQ(y2.data_ptr(), first);  // g2 reused g1's freed block
  EXPECT_EQ(g2.pool(), g1.pool());
  g1.replay();
  g2.replay();
  EXPECT_EQ(y2.sum().item<float>(), 7.0f * 4096);
  // The pool lives as long as a graph uses it.
  const cuda::MempoolId pool = g1.pool();
  g1.reset();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_EQ(segments_of(pool).size(), 1u);
  g2.reset();
  y2 = Tensor();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_TRUE(segments_of(pool).empty());

  // A handle made before any capture.
  const cuda::MempoolId handle = cuda::graph_pool_handle();
  EXPECT_EQ(handle.first, 0u);
  EXPECT_NE(handle.second, 0u);
  EXPECT_NE(cuda::graph_pool_handle(), handle);
  cuda::CUDAGraph h1, h2;
  Tensor a, b;
  {
    cuda::graph capture(h1, handle);
    a = x + 1.0;
  }
  {
    cuda::graph capture(h2, handle);
    b = x + 2.0;
  }
  EXPECT_EQ(h1.pool(), handle);
  EXPECT_EQ(h2.pool(), handle);
  EXPECT_EQ(segments_of(handle).size(), 1u);  // both captures' blocks in one segment
  h1.replay();
  h2.replay();
  EXPECT_EQ(a.sum().item<float>(), 2.0f * 4096);
  EXPECT_EQ(b.sum().item<float>(), 3.0f * 4096);
}

TEST_F(GraphPools, ForkedStreamsAllocateFromTheCapturesPool) {
  Tensor x = ember::ones({4096}, on0());
  cuda::Stream fork(0);
  cuda::CUDAGraph g;
  Tensor on_fork;
  {
    cuda::graph capture(g, {}, side_);
    fork.wait_stream(side_);
    {
      cuda::StreamGuard guard(fork);
      on_fork = x * 4.0;
    }
    side_.wait_stream(fork);
  }
  auto segments = segments_of(g.pool());
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0]["stream"], fork.id());
  g.replay();
  EXPECT_EQ(on_fork.sum().item<float>(), 4.0f * 4096);
}

// Issue 34 item 1 in the native mode (test_cuda_graphs_expandable.cpp has it with
// expandable segments): an output kept past its graph keeps the pool's segment through
// empty_cache, and the pool goes with the output's block.
TEST_F(GraphPools, AnOutputKeptPastItsGraphKeepsThePoolUntilItIsFreed) {
  Tensor x = ember::ones({1 << 20}, on0());
  Tensor keep;
  cuda::MempoolId pool;
  {
    cuda::CUDAGraph g;
    {
      cuda::graph capture(g, {}, side_);
      keep = x * 2.0;
    }
    pool = g.pool();
    g.replay();
  }
  cuda::empty_cache();
  EXPECT_EQ(segments_of(pool).size(), 1u);
  EXPECT_EQ(keep.sum().item<float>(), 2.0f * (1 << 20));
  keep = Tensor();
  x = Tensor();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_TRUE(segments_of(pool).empty());
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);
}

}  // namespace
