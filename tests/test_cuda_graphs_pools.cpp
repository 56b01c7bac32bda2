// CUDA graphs' private memory pools on an emulated device: routing of a capture's
// allocations, reuse in capture order, sharing between graphs, statistics and snapshots,
// and the return of a pool's memory once no graph uses it. Then MemPools (torch.cuda.MemPool,
// use_mem_pool), which are the same pools: routing of one thread's allocations, lifetime,
// pluggable segment allocators, use_on_oom, captures into a MemPool, and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::Tensor;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  cuda::emulate(2, 512 * MiB);  // cuda:1 only for MemPools' device checks and the OOM test
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

// Whether `t`'s memory lies in a segment of `pool`.
bool in_pool(const Tensor& t, cuda::MempoolId pool) {
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  for (const auto& segment : segments_of(pool)) {
    const auto start = segment["address"].get<uintptr_t>();
    if (address >= start && address < start + segment["total_size"].get<uintptr_t>()) return true;
  }
  return false;
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

// ---- MemPools ------------------------------------------------------------------------------

using GraphPoolsMemPool = GraphPools;

// As PyTorch's test_mempool_with_allocator, with the device's own memory: the guard holds a
// use, 1 MiB requests pack into 2 MiB small segments of the pool, and the snapshot shows them.
TEST_F(GraphPoolsMemPool, AGuardRoutesThisThreadsAllocationsToThePool) {
  cuda::MemPool pool;
  EXPECT_EQ(pool.id().first, 0u);
  EXPECT_NE(pool.id().second, 0u);
  EXPECT_EQ(pool.device(), 0);
  EXPECT_EQ(pool.allocator(), nullptr);
  EXPECT_EQ(pool.use_count(), 1);
  EXPECT_EQ(pool.snapshot(), "[]");
  constexpr int64_t kOneMiB = 256 * 1024;  // floats
  Tensor a, b, c, other;
  {
    cuda::use_mem_pool guard(pool);
    EXPECT_EQ(pool.use_count(), 2);
    a = ember::empty({kOneMiB}, on0());
    EXPECT_EQ(nlohmann::json::parse(pool.snapshot()).size(), 1u);
    // Only this thread's allocations: another thread's go to the device's pools meanwhile.
    std::thread([&] { other = ember::empty({kOneMiB}, on0()); }).join();
    b = ember::empty({kOneMiB}, on0());
    EXPECT_EQ(nlohmann::json::parse(pool.snapshot()).size(), 1u);  // packed into the same 2 MiB
    c = ember::empty({kOneMiB}, on0());
    EXPECT_EQ(nlohmann::json::parse(pool.snapshot()).size(), 2u);
  }
  EXPECT_EQ(pool.use_count(), 1);
  Tensor after = ember::empty({kOneMiB}, on0());
  EXPECT_TRUE(in_pool(a, pool.id()) && in_pool(b, pool.id()) && in_pool(c, pool.id()));
  EXPECT_FALSE(in_pool(other, pool.id()));
  EXPECT_FALSE(in_pool(after, pool.id()));
  const nlohmann::json segments = nlohmann::json::parse(pool.snapshot());
  ASSERT_EQ(segments.size(), 2u);
  for (const auto& segment : segments) {
    EXPECT_EQ(segment["segment_pool_id"], nlohmann::json({pool.id().first, pool.id().second}));
    EXPECT_EQ(segment["segment_type"], "small");
    EXPECT_EQ(segment["total_size"], 2 * MiB);
  }
  EXPECT_EQ(segments_of(pool.id()).size(), 2u);  // memory_snapshot_json shows the same segments
  for (Tensor* t : {&a, &b, &c}) t->fill_(1.0);
  EXPECT_EQ((a + b + c).sum().item<float>(), 3.0f * kOneMiB);
}

// A pool's memory stays reserved while a tensor from it lives, also after the pool and
// empty_cache; it returns once the tensor is freed too. A pool destroyed inside a guard is
// still the guard's (the guard holds a use).
TEST_F(GraphPoolsMemPool, APoolsMemoryReturnsAfterThePoolAndItsTensorsAreGoneAndEmptyCacheRuns) {
  Tensor t;
  cuda::MempoolId id;
  {
    cuda::MemPool pool;
    id = pool.id();
    {
      cuda::use_mem_pool guard(pool);
      t = ember::ones({1024 * 1024}, on0());  // 4 MiB: a 20 MiB large segment
    }
    cuda::empty_cache();
    EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_ + int64_t{20 * MiB});
    EXPECT_EQ(stat("segment.all.current"), baseline_segments_ + 1);
  }
  cuda::empty_cache();  // the pool is gone, its block is not
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_ + int64_t{20 * MiB});
  ASSERT_EQ(segments_of(id).size(), 1u);
  EXPECT_EQ(segments_of(id)[0]["allocated_size"], 4 * MiB);
  EXPECT_EQ(t.sum().item<float>(), 1024.0f * 1024);
  t = Tensor();
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_TRUE(segments_of(id).empty());
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);

  auto pool = std::make_unique<cuda::MemPool>();
  id = pool->id();
  {
    cuda::use_mem_pool guard(*pool);
    pool.reset();
    Tensor u = ember::ones({1024}, on0());
    EXPECT_TRUE(in_pool(u, id));
    EXPECT_EQ(u.sum().item<float>(), 1024.0f);
  }
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_TRUE(segments_of(id).empty());
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);
}

TEST_F(GraphPoolsMemPool, AnInnerGuardWinsUntilItEndsAndTheSamePoolTwiceIsRefused) {
  cuda::MemPool outer, inner;
  cuda::use_mem_pool outer_guard(outer);
  Tensor x = ember::empty({1024}, on0());
  {
    cuda::use_mem_pool inner_guard(inner);
    Tensor y = ember::empty({1024}, on0());
    EXPECT_TRUE(in_pool(y, inner.id()));
    EXPECT_FALSE(in_pool(y, outer.id()));
  }
  Tensor z = ember::empty({1024}, on0());
  EXPECT_TRUE(in_pool(x, outer.id()));
  EXPECT_TRUE(in_pool(z, outer.id()));
  const std::string already =
      "beginAllocateToPool: already recording to mempool_id (0, " + std::to_string(outer.id().second) + ")";
  EXPECT_THROW_MSG(cuda::use_mem_pool again(outer), ember::CudaError, already);
  // Another thread neither: one route per pool, as PyTorch's captures_underway.
  std::thread([&] { EXPECT_THROW_MSG(cuda::use_mem_pool again(outer), ember::CudaError, already); }).join();
  EXPECT_EQ(outer.use_count(), 2);  // state intact: the pool and the outer guard
  EXPECT_EQ(inner.use_count(), 1);
  Tensor w = ember::empty({1024}, on0());
  EXPECT_TRUE(in_pool(w, outer.id()));
}

// Guards of two threads at the same time: each thread's allocations go to its own pool.
TEST_F(GraphPoolsMemPool, ThreadsWithGuardsAtTheSameTimeAllocateFromTheirOwnPools) {
  cuda::MemPool first, second;
  std::vector<Tensor> kept[2];
  auto work = [&](int index, const cuda::MemPool& pool) {
    cuda::use_mem_pool guard(pool);
    for (int64_t k = 1; k <= 16; ++k) kept[index].push_back(ember::empty({1024 * k}, on0()));
  };
  std::thread a(work, 0, std::cref(first)), b(work, 1, std::cref(second));
  a.join();
  b.join();
  for (const Tensor& t : kept[0]) EXPECT_TRUE(in_pool(t, first.id()) && !in_pool(t, second.id()));
  for (const Tensor& t : kept[1]) EXPECT_TRUE(in_pool(t, second.id()) && !in_pool(t, first.id()));
  EXPECT_EQ(first.use_count(), 1);
  EXPECT_EQ(second.use_count(), 1);
}

TEST_F(GraphPoolsMemPool, BadDevicesAndMovedFromPoolsAreValueErrors) {
  cuda::MemPool pool;
  EXPECT_THROW_MSG(cuda::use_mem_pool guard(pool, "cpu"), ember::ValueError, "Expected a cuda device, but got: cpu");
  const std::string other_device = "use_mem_pool: MemPool (0, " + std::to_string(pool.id().second) +
                                   ") was made on cuda:0 and has no pool on cuda:1";
  EXPECT_THROW_MSG(cuda::use_mem_pool guard(pool, 1), ember::ValueError, other_device);
  EXPECT_THROW_MSG(cuda::use_mem_pool guard(pool, "cuda:1"), ember::ValueError, other_device);
  EXPECT_THROW_MSG(cuda::use_mem_pool guard(pool, 2), ember::IndexError, "out of index range");
  EXPECT_EQ(pool.use_count(), 1);
  {
    cuda::use_mem_pool guard(pool, "cuda");  // the current device
    EXPECT_EQ(pool.use_count(), 2);
  }
  cuda::MemPool moved = std::move(pool);
  EXPECT_TRUE(pool.id().empty());  // NOLINT(bugprone-use-after-move): a moved-from pool has none
  EXPECT_EQ(pool.use_count(), 0);
  EXPECT_EQ(pool.snapshot(), "[]");
  EXPECT_THROW_MSG(cuda::use_mem_pool guard(pool), ember::ValueError, "the MemPool was moved from");
  EXPECT_EQ(moved.use_count(), 1);
  // Ids are numbered with graph_pool_handle's, as PyTorch's test_mempool_id checks.
  const cuda::MempoolId handle = cuda::graph_pool_handle();
  cuda::MemPool next;
  EXPECT_EQ(handle.first, 0u);
  EXPECT_EQ(next.id().second, handle.second + 1);
}

// A pool made with a PluggableAllocator takes its segments from it (and only its segments),
// and hands them back through it once the pool is gone and empty_cache runs.
TEST_F(GraphPoolsMemPool, APoolsPluggableAllocatorMakesAndFreesItsSegments) {
  struct Counts {
    std::mutex mutex;
    std::vector<size_t> mallocs, frees;
  };
  auto counts = std::make_shared<Counts>();
  auto allocator = std::make_shared<cuda::PluggableAllocator>(
      [counts](size_t size, int /*device*/, cuda::Stream /*stream*/) -> void* {
        std::lock_guard lock(counts->mutex);
        counts->mallocs.push_back(size);
        return std::aligned_alloc(512, size);  // emulated device memory is host memory
      },
      [counts](void* ptr, size_t size, int /*device*/, cuda::Stream /*stream*/) {
        std::lock_guard lock(counts->mutex);
        counts->frees.push_back(size);
        std::free(ptr);
      });
  constexpr int64_t kOneMiB = 256 * 1024;  // floats
  {
    cuda::MemPool pool(allocator);
    EXPECT_EQ(pool.allocator(), allocator);
    EXPECT_EQ(pool.use_count(), 1);
    EXPECT_TRUE(counts->mallocs.empty());
    Tensor a, b, c;
    {
      cuda::use_mem_pool guard(pool);
      a = ember::empty({kOneMiB}, on0());
      b = ember::empty({kOneMiB}, on0());
      c = ember::empty({kOneMiB}, on0());
    }
    Tensor outside = ember::empty({kOneMiB}, on0());
    EXPECT_EQ(counts->mallocs, (std::vector<size_t>{2 * MiB, 2 * MiB}));
    EXPECT_EQ(nlohmann::json::parse(pool.snapshot()).size(), 2u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_ + int64_t{6 * MiB});  // the pool's and outside's
    for (Tensor* t : {&a, &b, &c, &outside}) t->fill_(1.0);
    EXPECT_EQ((a + b + c + outside).sum().item<float>(), 4.0f * kOneMiB);
    cuda::synchronize();
  }
  EXPECT_TRUE(counts->frees.empty());  // the tensors were freed into the pool's cache
  cuda::empty_cache();
  EXPECT_EQ(counts->frees, (std::vector<size_t>{2 * MiB, 2 * MiB}));
  EXPECT_EQ(stat("reserved_bytes.all.current"), baseline_reserved_);
}

// use_on_oom: under a per-process memory fraction, an allocation outside any pool that the
// device cannot hold takes the free block of a use_on_oom pool; a plain pool's is not lent.
TEST_F(GraphPoolsMemPool, AUseOnOomPoolLendsItsFreeBlockBeforeOutOfMemory) {
  cuda::DeviceGuard device(1);
  cuda::synchronize();
  cuda::empty_cache();
  cuda::set_per_process_memory_fraction(0.125, 1);  // 64 MiB of 512
  const ember::TensorOptions on1 = ember::TensorOptions().device(ember::Device(ember::kCUDA, 1));
  constexpr int64_t k40MiB = 10 * 1024 * 1024;  // floats
  auto fill_and_free = [&](const cuda::MemPool& pool) {
    cuda::use_mem_pool guard(pool);
    Tensor t = ember::empty({k40MiB}, on1);
    void* ptr = t.data_ptr();
    return ptr;
  };
  const int64_t ooms = cuda::memory_stats(1).at("num_ooms");
  {
    cuda::MemPool plain;
    fill_and_free(plain);
    EXPECT_THROW_MSG((void)ember::empty({k40MiB}, on1), ember::OutOfMemoryError, "CUDA out of memory");
    EXPECT_EQ(cuda::memory_stats(1).at("num_ooms"), ooms + 1);
    EXPECT_EQ(nlohmann::json::parse(plain.snapshot()).size(), 1u);  // intact
  }
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
  {
    cuda::MemPool lender(nullptr, /*use_on_oom=*/true);
    void* lent = fill_and_free(lender);
    Tensor borrowed = ember::ones({k40MiB}, on1);
    EXPECT_EQ(borrowed.data_ptr(), lent);
    EXPECT_EQ(cuda::memory_stats(1).at("num_ooms"), ooms + 1);
    EXPECT_EQ(nlohmann::json::parse(lender.snapshot())[0]["allocated_size"], 40 * MiB);
    EXPECT_EQ(borrowed.sum().item<float>(), static_cast<float>(k40MiB));
    borrowed = Tensor();
    cuda::synchronize();
    EXPECT_EQ(nlohmann::json::parse(lender.snapshot())[0]["allocated_size"], 0);  // back in the pool
  }
  cuda::set_per_process_memory_fraction(1.0, 1);
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
}

// CUDA graphs' pools are MemPools: a capture given a MemPool's id allocates from it and holds
// a use of it until the graph is reset.
TEST_F(GraphPoolsMemPool, ACaptureIntoAMemPoolAllocatesFromItAndHoldsAUse) {
  cuda::MemPool pool;
  Tensor x = ember::ones({4096}, on0());
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g, pool.id(), side_);
    y = x * 2.0;
  }
  EXPECT_EQ(g.pool(), pool.id());
  EXPECT_EQ(pool.use_count(), 2);
  EXPECT_TRUE(in_pool(y, pool.id()));
  g.replay();
  EXPECT_EQ(y.sum().item<float>(), 2.0f * 4096);
  // The graph's later eager allocations from the pool come through a guard.
  {
    cuda::use_mem_pool guard(pool);
    Tensor z = y + 1.0;
    EXPECT_TRUE(in_pool(z, pool.id()));
  }
  g.reset();
  EXPECT_EQ(pool.use_count(), 1);
}

}  // namespace
