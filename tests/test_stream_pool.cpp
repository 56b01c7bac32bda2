// cuda::Stream() hands out pooled streams, as torch.cuda.Stream() does: 32 per priority
// and device, round-robin, created on first use; dropping a handle never waits.
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "emulated_support.h"
#include "runtime/stream_pool.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::testing::on_stream;
using namespace std::chrono_literals;

namespace {

constexpr int kPool = ember::detail::kStreamsPerPool;

int os_threads() {
  int n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST(StreamPool, RoundRobinOver32StreamsPerPriority) {
  EMBER_REQUIRE_DEVICES(2);
  for (int priority : {0, -1}) {
    std::vector<cuda::Stream> streams;
    for (int i = 0; i < 2 * kPool; ++i) streams.emplace_back(1, priority);
    std::set<uint64_t> ids;
    for (int i = 0; i < kPool; ++i) {
      ids.insert(streams[i].id());
      EXPECT_EQ(streams[i + kPool], streams[i]) << i;  // the 33rd is the 1st again
      EXPECT_EQ(streams[i].priority(), priority);
      EXPECT_EQ(streams[i].device_index(), 1);
      EXPECT_FALSE(streams[i].is_default());
    }
    EXPECT_EQ(ids.size(), static_cast<size_t>(kPool));
  }
  // The priorities and the devices have pools of their own.
  EXPECT_NE(cuda::Stream(1, 0), cuda::Stream(1, -1));
  cuda::Stream on0(0);
  for (int i = 0; i < kPool; ++i) EXPECT_NE(cuda::Stream(1), on0);
}

TEST(StreamPool, ThousandStreamsStartAtMost64Workers) {
  EMBER_REQUIRE_EMULATED();  // one worker thread per emulated stream
  cuda::synchronize(2);      // the backend (and its default streams' workers) exists
  int before = os_threads();
  std::vector<cuda::Stream> streams;
  for (int i = 0; i < 1000; ++i) streams.emplace_back(2, i % 2 == 0 ? 0 : -1);
  EXPECT_LE(os_threads() - before, 2 * kPool);
  for (auto& s : streams) s.synchronize();
}

TEST(StreamPool, DroppingTheLastHandleDoesNotWait) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false, gave_up = false;
  std::atomic<int> ran{0};
  {
    cuda::Stream s(3);
    // Blocks the stream until the host releases it below, after the handle is gone.
    on_stream(s, [&] {
      std::unique_lock lock(mutex);
      gave_up = !cv.wait_for(lock, 30s, [&] { return released; });  // a deadlock guard only
      ++ran;
    });
    on_stream(s, [&] { ++ran; });
  }
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  cv.notify_all();
  cuda::synchronize(3);
  EXPECT_FALSE(gave_up) << "dropping the stream's handle waited for its queued work";
  EXPECT_EQ(ran.load(), 2);
}

// The backend hook behind it (cudaStreamDestroy): returns at once; queued work still runs.
TEST(StreamPool, BackendDestroyStreamDoesNotWait) {
  EMBER_REQUIRE_EMULATED();
  auto& backend = ember::testing::emulated();
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false, gave_up = false;
  std::atomic<int> ran{0};
  ember::detail::BackendStream* stream = backend.create_stream(1, 0);
  backend.launch_host_function(stream, [&] {
    std::unique_lock lock(mutex);
    gave_up = !cv.wait_for(lock, 30s, [&] { return released; });  // a deadlock guard only
    ++ran;
  });
  auto* event = backend.create_event(1, false);
  backend.record(event, stream);
  backend.destroy_stream(stream);
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  cv.notify_all();
  backend.synchronize(event);
  backend.destroy_event(event);
  EXPECT_FALSE(gave_up) << "destroy_stream waited for the stream's queued work";
  EXPECT_EQ(ran.load(), 1);
}

TEST(StreamPool, ResetDeviceStartsTheDevicePoolAgain) {
  EMBER_REQUIRE_DEVICES(4);
  cuda::Stream before(3);
  before.synchronize();
  cuda::reset_device(3);
  EXPECT_THROW(before.synchronize(), ember::CudaError);  // invalid after the reset
  std::vector<cuda::Stream> after;
  for (int i = 0; i < kPool; ++i) after.emplace_back(3);
  for (auto& s : after) {
    EXPECT_NE(s, before);
    s.synchronize();
  }
}

// A worker thread that cannot start is a CudaError, and the pool slot is tried again
// by the next request.
TEST(StreamPool, WorkerStartFailureIsACudaError) {
  EMBER_REQUIRE_EMULATED();  // a thread per stream
  cuda::reset_device(2);     // every slot of cuda:2 is empty again
  pthread_attr_t huge, saved;
  ASSERT_EQ(pthread_getattr_default_np(&saved), 0);
  pthread_attr_init(&huge);
  // A stack larger than the address space: every thread creation fails.
  ASSERT_EQ(pthread_attr_setstacksize(&huge, size_t{1} << 47), 0);
  ASSERT_EQ(pthread_setattr_default_np(&huge), 0);
  bool thread_failed = false;
  try {
    std::thread([] {}).join();
  } catch (const std::system_error&) {
    thread_failed = true;
  }
  std::string message;
  if (thread_failed) {
    for (int i = 0; i < kPool; ++i) {
      message = ember::testing::error_of<ember::CudaError>([] { cuda::Stream s(2); });
      if (message == "<no error>") break;
    }
  }
  ASSERT_EQ(pthread_setattr_default_np(&saved), 0);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&saved);
  if (!thread_failed) GTEST_SKIP() << "this build's thread creation ignores the default stack size";
  EXPECT_EQ(message.rfind("CUDA error: resource allocation failed: cannot start the worker thread of a new stream on "
                          "cuda:2 (",
                          0),
            0u)
      << message;
  std::vector<cuda::Stream> streams;
  for (int i = 0; i < kPool; ++i) streams.emplace_back(2);
  for (auto& s : streams) s.synchronize();
}

}  // namespace
