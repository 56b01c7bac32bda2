// CUDA graphs under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync on an emulated device
// (issue 34, "Also"; Note [Async allocator during capture], Note [Emulated graph memory]):
// captured allocations are graph memory, replays may run while the last replay's outputs
// are held, frees of memory from outside the capture wait for its end, and cudaFreeAsync
// of pool memory inside a capture is refused as CUDA refuses it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "emulated_support.h"
#include "runtime/stream_state.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool configured =
    (setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 1), ember::cuda::emulate(1, 64 * MiB), true);

}  // namespace

namespace ember::testing {
namespace {

TensorOptions cuda0() { return TensorOptions().device(Device(kCUDA, 0)); }
std::vector<float> values(const Tensor& t) { return t.cpu().to_vector<float>(); }

TEST(AsyncAllocatorCapture, CapturedOutputsSurviveReplaysAndTheGraph) {
  ASSERT_TRUE(configured);
  ASSERT_EQ(cuda::get_allocator_backend(), "cudaMallocAsync");
  Tensor x = full({4}, 1.0, cuda0());
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  Tensor y;
  {
    cuda::CUDAGraph g;
    {
      cuda::graph capture(g, {}, side);  // refused before: "needs the native allocator"
      Tensor tmp = x * 2.0;              // allocated and freed inside: an alloc and a free node
      y = tmp + 1.0;                     // outlives the capture
    }
    g.replay();
    x.fill_(2.0);
    g.replay();  // y of the first replay still held (AutoFreeOnLaunch)
    EXPECT_EQ(values(y), std::vector<float>(4, 5.0f));
  }
  // The graph is gone; the output it allocated stays valid until freed.
  EXPECT_EQ(values(y), std::vector<float>(4, 5.0f));
  y = Tensor();  // the graph's output freed after the graph: no error, now or later
  cuda::synchronize();
}

TEST(AsyncAllocatorCapture, FreesOfMemoryFromOutsideTheCaptureWaitForItsEnd) {
  Tensor x = full({1024}, 3.0, cuda0());
  Tensor outside = full({1024}, 7.0, cuda0());
  const size_t held = cuda::memory_allocated(0);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g, {}, side);
    outside = Tensor();  // a cudaFreeAsync here would be a free node of non-graph memory
    y = x + 1.0;
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(1024, 4.0f));
  cuda::synchronize();
  // The deferred free ran when the capture ended: `outside`'s 4 KiB are no longer in use
  // (graph memory, `y`'s, is not the pool's).
  EXPECT_LT(cuda::memory_allocated(0), held);
}

TEST(AsyncAllocatorCapture, TheBackendRefusesAFreeOfPoolMemoryInsideACapture) {
  detail::Backend& backend = detail::undecorated_backend();
  detail::BackendStream* stream = backend.create_stream(0, 0);
  void* ptr = backend.stream_alloc(0, 4096, stream);
  ASSERT_NE(ptr, nullptr);
  backend.begin_capture(stream, detail::CaptureMode::Global);
  try {
    backend.stream_free(0, ptr, stream);
    ADD_FAILURE() << "no CudaError";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("operation not permitted when stream is capturing (cudaFreeAsync in "
                                               "a capture of memory not allocated in a graph)"));
  }
  EXPECT_EQ(backend.capture_status(stream).first, detail::CaptureStatus::Invalidated);
  EXPECT_THROW(backend.end_capture(stream), CudaError);
  backend.stream_free(0, ptr, stream);  // after the capture: an ordinary free
  backend.synchronize(stream);
  backend.destroy_stream(stream);
}

}  // namespace
}  // namespace ember::testing
