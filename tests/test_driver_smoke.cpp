// Driver-only smoke test: the host-side CUDA paths that only a GPU exercises (issue 41).
// Skipped unless the selected backend is the driver (no GPU, or emulated devices asked
// for). scripts/gpu-run runs it under each allocator mode:
//   PYTORCH_CUDA_ALLOC_CONF= (native), expandable_segments:True, backend:cudaMallocAsync,
//   pinned_use_cuda_host_register:True.
// Values are checked against host arithmetic; no timing thresholds.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "ember/cuda.h"
#include "ember/cuda_graph.h"
#include "ember/ember.h"
#include "ember/fft.h"
#include "runtime/backend.h"

namespace ember {
namespace {

bool on_driver() {
  detail::Backend* backend = detail::backend_or_null();
  return backend != nullptr && std::string(backend->name()) == "driver";
}

#define SKIP_WITHOUT_DRIVER() \
  if (!on_driver()) GTEST_SKIP() << "the driver backend is not selected (no GPU, or emulated devices asked for)"

TensorOptions cuda0() { return TensorOptions().device(Device(kCUDA, 0)); }

std::vector<float> host(const Tensor& t) { return t.cpu().contiguous().to_vector<float>(); }

TEST(DriverSmoke, AllocateFreeAndEmptyTheCache) {
  SKIP_WITHOUT_DRIVER();
  cuda::empty_cache();
  const size_t before = cuda::memory_allocated(0);
  {
    Tensor x = ones({1 << 20}, cuda0());
    EXPECT_GE(cuda::memory_allocated(0), before + (size_t{4} << 20));
    // A multi-block reduction (its partials are temporaries of the caching allocator).
    EXPECT_EQ(x.sum().item<float>(), float(1 << 20));
  }
  EXPECT_EQ(cuda::memory_allocated(0), before);
  cuda::empty_cache();
  cuda::synchronize();
}

TEST(DriverSmoke, AllocationFromAFreshThread) {
  SKIP_WITHOUT_DRIVER();
  // A thread with no context bound yet: the virtual-memory calls of expandable segments
  // (cuMemAddressReserve, cuMemMap) need the primary context bound first (finding 3).
  float total = 0;
  std::thread([&] {
    Tensor y = ones({16 << 20}, cuda0());  // 64 MiB: a new segment in every allocator mode
    total = y.sum().item<float>();
  }).join();
  EXPECT_EQ(total, float(16 << 20));
}

TEST(DriverSmoke, MatmulThroughTemporaries) {
  SKIP_WITHOUT_DRIVER();
  // Non-contiguous operands and a transposed output go through Workspace temporaries.
  Tensor a = arange(12, cuda0()).to(kFloat32).reshape({3, 4});
  Tensor b = arange(8, cuda0()).to(kFloat32).reshape({2, 4});
  Tensor c = matmul(a, b.t());
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += float(i * 4 + k) * float(j * 4 + k);
      want.push_back(s);
    }
  EXPECT_EQ(host(c), want);
}

TEST(DriverSmoke, CaptureAndReplayTwiceIntoAFreshPool) {
  SKIP_WITHOUT_DRIVER();
  Tensor input = arange(1024, cuda0()).to(kFloat32);
  Tensor weight = ones({32, 32}, cuda0());
  cuda::synchronize();
  cuda::CUDAGraph g;
  Tensor out, total;
  {
    cuda::graph capture(g);  // a fresh private pool: the first allocation reaches cudaMalloc
    out = input * 2.0 + 1.0;
    total = matmul(out.reshape({32, 32}), weight).sum();
  }
  for (float scale : {1.0f, 3.0f}) {
    input.copy_(arange(1024, cuda0()).to(kFloat32) * scale);
    g.replay();  // the outputs of the last replay are still held (AutoFreeOnLaunch)
    g.replay();
    std::vector<float> got = host(out);
    double sum = 0;
    for (int i = 0; i < 1024; ++i) {
      ASSERT_EQ(got[i], 2.0f * scale * float(i) + 1.0f) << i;
      sum += got[i];
    }
    EXPECT_NEAR(total.item<float>(), 32 * sum, 1e-3 * 32 * sum);
  }
}

TEST(DriverSmoke, FftRoundTripEagerAndCaptured) {
  SKIP_WITHOUT_DRIVER();
  Tensor x = arange(20, cuda0()).to(kFloat32);
  std::vector<float> want = host(x);
  std::vector<float> eager = host(fft::irfft(fft::rfft(x), 20));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(eager[i], want[i], 1e-4);
  cuda::CUDAGraph g;
  Tensor back;
  {
    cuda::graph capture(g);
    back = fft::irfft(fft::rfft(x.narrow(0, 0, 18)), 18);  // a plan first made inside the capture
  }
  g.replay();
  std::vector<float> got = host(back);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
}

TEST(DriverSmoke, PinnedCopiesAndATimedEvent) {
  SKIP_WITHOUT_DRIVER();
  Tensor pinned = arange(4096).to(kFloat32).pin_memory();
  cuda::Event start(true), end(true);
  start.record();
  Tensor on_device = pinned.to(Device(kCUDA, 0), /*non_blocking=*/true);
  Tensor back = (on_device + 1.0).to(Device(kCPU), /*non_blocking=*/false);
  end.record();
  end.synchronize();
  EXPECT_GE(start.elapsed_time(end), 0.0f);
  std::vector<float> got = back.to_vector<float>();
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(got[i], float(i) + 1.0f);
}

// Issue 39's driver paths: a MemPool's guard routes allocations (its use count), each
// (handle, stream) takes a cuBLAS workspace from the caching allocator on its first GEMM
// and clear_cublas_workspaces() gives it back, a registered generator draws new numbers on
// each replay equal to eager draws, and float16 GEMMs run under each cuBLAS precision switch.
TEST(DriverSmoke, MemPoolGuardRoutesAllocations) {
  SKIP_WITHOUT_DRIVER();
  cuda::MemPool pool;
  EXPECT_EQ(pool.use_count(), 1);
  {
    cuda::use_mem_pool guard(pool);
    EXPECT_EQ(pool.use_count(), 2);
    Tensor t = ones({1 << 18}, cuda0());
    EXPECT_EQ(t.sum().item<float>(), float(1 << 18));
  }
  EXPECT_EQ(pool.use_count(), 1);
}

TEST(DriverSmoke, CublasWorkspaceComesFromTheCachingAllocator) {
  SKIP_WITHOUT_DRIVER();
  Tensor a = ones({64, 64}, cuda0()), b = ones({64, 64}, cuda0());
  cuda::synchronize();
  cuda::clear_cublas_workspaces();
  const size_t before = cuda::memory_allocated(0);
  {
    Tensor c = matmul(a, b);
    EXPECT_EQ(host(c)[0], 64.0f);
  }
  cuda::synchronize();
  EXPECT_GT(cuda::memory_allocated(0), before);  // the workspace stays with its stream
  cuda::clear_cublas_workspaces();
  EXPECT_EQ(cuda::memory_allocated(0), before);
}

TEST(DriverSmoke, RegisteredGeneratorDrawsNewNumbersPerReplay) {
  SKIP_WITHOUT_DRIVER();
  Tensor x = empty({1000}, cuda0());
  Generator gen(Device(kCUDA, 0)), eager(Device(kCUDA, 0));
  gen.manual_seed(5);
  eager.manual_seed(5);
  cuda::CUDAGraph graph;
  graph.register_generator_state(gen);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    x.normal_(0, 1, gen);
    graph.capture_end();
  }
  cuda::current_stream(0).wait_stream(side);
  std::vector<float> previous;
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    std::vector<float> got = host(x), want = host(randn({1000}, cuda0(), eager));
    EXPECT_EQ(got, want);  // the same kernel on the same words
    EXPECT_NE(got, previous);
    previous = got;
  }
}

TEST(DriverSmoke, HalfGemmsUnderEachPrecisionSwitch) {
  SKIP_WITHOUT_DRIVER();
  Tensor a = ones({16, 512}, cuda0()).to(kFloat16), b = ones({512, 16}, cuda0()).to(kFloat16);
  for (bool reduced : {true, false}) {
    for (bool fp16_accumulation : {false, true}) {
      backends::cuda::matmul.allow_fp16_reduced_precision_reduction = reduced;
      backends::cuda::matmul.allow_fp16_accumulation = fp16_accumulation;
      std::vector<float> got = host(matmul(a, b).to(kFloat32));  // 512 is exact in float16
      for (float v : got) EXPECT_EQ(v, 512.0f);
    }
  }
  backends::cuda::matmul.allow_fp16_reduced_precision_reduction = true;
  backends::cuda::matmul.allow_fp16_accumulation = false;
}

}  // namespace
}  // namespace ember
