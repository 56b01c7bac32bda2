// The emulated devices refuse, per capture mode and per calling thread's mode, what CUDA
// refuses during a stream capture (Note [Capture modes] in backends/emulated/emulated_capture.h),
// and the callers that allocate inside a capture switch to Relaxed as PyTorch's do
// (issue 41, findings 1, 2 and 7; issue 34's pinned allocator during a capture).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "distributed/collective_watchdog.h"
#include "ember/cuda.h"
#include "ember/data.h"
#include "ember/ember.h"
#include "ember/errors.h"
#include "emulated_support.h"
#include "memory/caching_host_allocator.h"
#include "runtime/backend.h"

namespace cuda = ember::cuda;
namespace detail = ember::detail;
using detail::CaptureMode;
using detail::CaptureStatus;
using ember::CudaError;
using ember::Tensor;
using ::testing::HasSubstr;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(2, 256 * MiB);
  return true;
}();

const char* kNotPermitted = "operation not permitted when stream is capturing";

detail::Backend& backend() { return detail::undecorated_backend(); }

/// Runs `call`; returns the CudaError message it threw, or "" when it did not throw.
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const CudaError& e) {
    return e.what();
  }
  return {};
}

/// A capture of `mode` open on a fresh stream of device 0, begun by the constructing
/// thread; ended (and its graph destroyed) by end().
class OpenCapture {
 public:
  explicit OpenCapture(CaptureMode mode) : stream_(backend().create_stream(0, 0)) {
    backend().begin_capture(stream_, mode);
  }
  ~OpenCapture() { backend().destroy_stream(stream_); }
  CaptureStatus status() { return backend().capture_status(stream_).first; }
  /// Ends the capture; true when it ended with a graph (it was not invalidated).
  bool end() {
    try {
      backend().destroy_graph(backend().end_capture(stream_));
      return true;
    } catch (const CudaError&) {
      return false;
    }
  }

 private:
  detail::BackendStream* stream_;
};

/// raw_alloc of 1 MiB on device 0 from the calling thread, in `thread_mode`; frees it after
/// the capture ends (cudaFree itself is refused during it). Returns "" or the error.
std::string try_alloc(CaptureMode thread_mode, void** out) {
  detail::CaptureModeGuard mode(backend(), thread_mode);
  return error_of([&] { *out = backend().raw_alloc(0, MiB); });
}

TEST(EmulatedCaptureModes, ExchangeReturnsThePreviousModeOfTheCallingThreadOnly) {
  EXPECT_EQ(backend().exchange_capture_mode(CaptureMode::Relaxed), CaptureMode::Global);  // a thread starts Global
  std::thread([] { EXPECT_EQ(backend().exchange_capture_mode(CaptureMode::ThreadLocal), CaptureMode::Global); }).join();
  EXPECT_EQ(backend().exchange_capture_mode(CaptureMode::Global), CaptureMode::Relaxed);
  {
    detail::CaptureModeGuard guard(backend(), CaptureMode::ThreadLocal);
    EXPECT_EQ(backend().exchange_capture_mode(CaptureMode::ThreadLocal), CaptureMode::ThreadLocal);
  }
  EXPECT_EQ(backend().exchange_capture_mode(CaptureMode::Global), CaptureMode::Global);  // the guard restored it
}

// cudaMalloc during a capture: refused with the capture invalidated, following
// cudaThreadExchangeStreamCaptureMode's table of (thread mode, capture mode, whose capture).
TEST(EmulatedCaptureModes, RawAllocFollowsTheThreadModeTable) {
  struct Case {
    CaptureMode capture;
    bool own_thread;
    CaptureMode thread;
    bool refused;
  };
  const Case cases[] = {
      {CaptureMode::Global, true, CaptureMode::Global, true},
      {CaptureMode::Global, true, CaptureMode::ThreadLocal, true},
      {CaptureMode::Global, true, CaptureMode::Relaxed, false},
      {CaptureMode::Global, false, CaptureMode::Global, true},
      {CaptureMode::Global, false, CaptureMode::ThreadLocal, false},
      {CaptureMode::Global, false, CaptureMode::Relaxed, false},
      {CaptureMode::ThreadLocal, true, CaptureMode::Global, true},
      {CaptureMode::ThreadLocal, true, CaptureMode::Relaxed, false},
      {CaptureMode::ThreadLocal, false, CaptureMode::Global, false},
      {CaptureMode::Relaxed, true, CaptureMode::Global, false},
      {CaptureMode::Relaxed, false, CaptureMode::Global, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "capture mode " << int(c.capture) << ", own thread " << c.own_thread
                                    << ", thread mode " << int(c.thread));
    OpenCapture capture(c.capture);
    void* ptr = nullptr;
    std::string error;
    if (c.own_thread) {
      error = try_alloc(c.thread, &ptr);
    } else {
      std::thread([&] { error = try_alloc(c.thread, &ptr); }).join();
    }
    if (c.refused) {
      EXPECT_THAT(error, HasSubstr(std::string(kNotPermitted) + " (cudaMalloc)"));
      EXPECT_EQ(ptr, nullptr);
      EXPECT_EQ(capture.status(), CaptureStatus::Invalidated);
    } else {
      EXPECT_EQ(error, "");
      EXPECT_NE(ptr, nullptr);
      EXPECT_EQ(capture.status(), CaptureStatus::Active);
    }
    EXPECT_EQ(capture.end(), !c.refused);
    backend().raw_free(0, ptr);
  }
}

// Every other call that allocates is refused the same way in Global mode, and allowed Relaxed.
TEST(EmulatedCaptureModes, AllocatingCallsAreRefusedInGlobalModeAndAllowedRelaxed) {
  void* range = backend().reserve_address_range(0, 2 * MiB);
  ASSERT_NE(range, nullptr);
  std::vector<char> host(4096);
  const std::pair<const char*, std::function<void()>> calls[] = {
      {"cuMemCreate", [&] { ASSERT_TRUE(backend().map_memory(0, range, 2 * MiB)); }},
      {"cudaHostAlloc", [&] { backend().pinned_free(backend().pinned_alloc(64)); }},
      {"cudaHostRegister", [&] { ASSERT_TRUE(backend().host_register(host.data(), host.size())); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    {
      OpenCapture capture(CaptureMode::Global);
      EXPECT_THAT(error_of(call), HasSubstr(std::string(kNotPermitted) + " (" + name + ")"));
      EXPECT_FALSE(capture.end());
    }
    {
      OpenCapture capture(CaptureMode::Global);
      detail::CaptureModeGuard relaxed(backend(), CaptureMode::Relaxed);
      // cudaFreeHost is itself unsafe: the pinned case frees inside the relaxed scope too.
      EXPECT_EQ(error_of(call), "");
      EXPECT_TRUE(capture.end());
    }
  }
  backend().host_unregister(host.data());
  backend().unmap_memory(0, range, 2 * MiB);
  backend().release_address_range(0, range, 2 * MiB);
}

// Finding 1: the first allocation of a capture reaches cudaMalloc from the capturing thread
// in Global mode; the caching allocator turns Relaxed around it. Finding 2: a cuFFT plan
// first made inside a capture, likewise.
TEST(EmulatedCaptureModes, FirstAllocationAndFirstFftPlanInsideAGlobalCaptureWork) {
  Tensor x = ember::arange(16, ember::TensorOptions().device(ember::Device(ember::kCUDA, 0))).to(ember::kFloat32);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph g;
  Tensor doubled, spectrum;
  {
    cuda::StreamGuard guard(side);
    g.capture_begin();  // Global, PyTorch's default
    doubled = x * 2.0;
    spectrum = ember::fft::irfft(ember::fft::rfft(x.narrow(0, 0, 12)), 12);  // a size no test planned before
    g.capture_end();
  }
  g.replay();
  g.replay();
  cuda::synchronize();
  std::vector<float> twice, back;
  for (int i = 0; i < 16; ++i) twice.push_back(2.0f * i);
  for (int i = 0; i < 12; ++i) back.push_back(float(i));
  EXPECT_EQ(doubled.cpu().to_vector<float>(), twice);
  std::vector<float> got = spectrum.cpu().to_vector<float>();
  ASSERT_EQ(got.size(), back.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], back[i], 1e-4);
}

// Finding 7: a thread that switched itself to Relaxed (the watchdog, the pin thread) never
// invalidates another thread's Global capture.
TEST(EmulatedCaptureModes, RelaxedThreadDoesNotInvalidateAnotherThreadsGlobalCapture) {
  Tensor other = ember::full({4}, 3.0, ember::TensorOptions().device(ember::Device(ember::kCUDA, 1)));
  cuda::synchronize(1);
  detail::BackendEvent* event = backend().create_event(1, false);
  backend().record(event, backend().default_stream(1));
  OpenCapture capture(CaptureMode::Global);
  std::string error;
  std::thread([&] {
    backend().exchange_capture_mode(CaptureMode::Relaxed);
    error = error_of([&] {
      backend().synchronize(event);
      (void)backend().query(event);
      backend().pinned_free(backend().pinned_alloc(64));
      (void)other.cpu();
    });
  }).join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(capture.end());
  backend().destroy_event(event);
}

// Finding 7, the watchdog: its event queries run on its own thread, Relaxed.
TEST(EmulatedCaptureModes, CollectiveWatchdogQueriesDoNotInvalidateACapture) {
  detail::BackendEvent* event = backend().create_event(1, false);
  backend().record(event, backend().default_stream(1));
  backend().synchronize(event);
  OpenCapture capture(CaptureMode::Global);
  std::promise<std::string> queried;
  {
    detail::distributed::CollectiveWatchdog watchdog(0, std::chrono::seconds(60), [](const std::string&) {});
    watchdog.watch(
        1, "all_reduce",
        [&] {
          queried.set_value(error_of([&] { (void)backend().query(event); }));
          return true;
        },
        [](const std::exception_ptr&) {});
    EXPECT_EQ(queried.get_future().get(), "");
  }
  EXPECT_TRUE(capture.end());
  backend().destroy_event(event);
}

// Finding 7, the pin thread: a pinning DataLoader beside a Global capture on this thread.
TEST(EmulatedCaptureModes, PinningDataLoaderBesideAGlobalCapture) {
  ember::data::TensorDataset ds(ember::arange(40, ember::TensorOptions().dtype(ember::kFloat32)).view({10, 4}),
                                ember::arange(10));
  OpenCapture capture(CaptureMode::Global);
  int64_t rows = 0;
  {
    ember::data::DataLoader loader(ds, ember::data::DataLoaderOptions().batch_size(4).num_workers(2).pin_memory(true));
    for (const ember::data::Example& batch : loader) {
      EXPECT_TRUE(batch.data.is_pinned());
      rows += batch.data.size(0);
    }
  }
  EXPECT_EQ(rows, 10);
  EXPECT_EQ(capture.status(), CaptureStatus::Active);
  EXPECT_TRUE(capture.end());
}

// Issue 34: a pinned malloc while a Global capture is open queries no pending event (the
// query would invalidate the capture); it takes a cached block, and the pending ones are
// processed once no capture is open.
TEST(EmulatedCaptureModes, PinnedAllocatorDefersEventQueriesWhileACaptureIsOpen) {
  detail::CachingHostAllocator pinned(backend());
  cuda::Stream user(1);
  detail::StreamRef use{user.state()->native(), user.state()->id(), 1};
  void* cached = pinned.malloc(1024);
  void* used = pinned.malloc(1024);
  pinned.free(cached);  // no stream use: cached at once
  pinned.record_stream(used, use);
  pinned.free(used);  // waits for an event on `user`
  user.synchronize();
  {
    OpenCapture capture(CaptureMode::Global);
    void* again = nullptr;
    EXPECT_EQ(error_of([&] { again = pinned.malloc(1024); }), "");
    EXPECT_EQ(again, cached);
    EXPECT_TRUE(capture.end());
    pinned.free(again);
  }
  // No capture open: the event is processed and `used` is reused.
  void* a = pinned.malloc(1024);
  void* b = pinned.malloc(1024);
  EXPECT_TRUE((a == cached && b == used) || (a == used && b == cached));
  EXPECT_EQ(pinned.stats().at("num_host_alloc"), 2);
  pinned.free(a);
  pinned.free(b);
}

}  // namespace
