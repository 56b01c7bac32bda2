// Streams: current streams per thread and device, StreamGuard, ordering and concurrency.
#include <atomic>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "emulated_support.h"
#include "runtime/context.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::testing::on_stream;
using namespace std::chrono_literals;

namespace {

TEST(RuntimeStreams, DefaultAndCurrentStreams) {
  EMBER_REQUIRE_DEVICES(4);
  cuda::Stream d0 = cuda::default_stream();
  EXPECT_TRUE(d0.is_default());
  EXPECT_EQ(d0.id(), 0u);
  EXPECT_EQ(d0.device_index(), 0);
  EXPECT_EQ(cuda::current_stream(), d0);
  EXPECT_EQ(cuda::default_stream(2).device_index(), 2);
  EXPECT_NE(cuda::default_stream(2), d0);
  EXPECT_EQ(cuda::current_stream(3), cuda::default_stream(3));
  EXPECT_THROW(cuda::default_stream(cuda::device_count()), ember::IndexError);
}

TEST(RuntimeStreams, NewStreamsAreDistinct) {
  EMBER_REQUIRE_DEVICES(4);
  cuda::Stream a, b;
  EXPECT_FALSE(a.is_default());
  EXPECT_NE(a, b);
  EXPECT_NE(a.id(), b.id());
  EXPECT_NE(a.id(), 0u);
  cuda::Stream copy = a;
  EXPECT_EQ(copy, a);
  EXPECT_EQ(std::hash<cuda::Stream>()(copy), std::hash<cuda::Stream>()(a));
  EXPECT_EQ(a.device_index(), 0);
  EXPECT_EQ(a.device(), ember::Device(ember::kCUDA, 0));
  auto [least, greatest] = cuda::Stream::priority_range();
  EXPECT_LE(greatest, least);  // lower numbers are higher priorities
  cuda::Stream on2(2, greatest);
  EXPECT_EQ(on2.device_index(), 2);
  EXPECT_EQ(on2.priority(), greatest);
  EXPECT_EQ(cuda::Stream(1, greatest - 6).priority(), greatest);  // clamped into the range, as CUDA does
  EXPECT_EQ(cuda::Stream(1, least + 5).priority(), least);
  EXPECT_THROW(cuda::Stream(cuda::device_count()), ember::IndexError);
  cuda::DeviceGuard g(3);
  EXPECT_EQ(cuda::Stream().device_index(), 3);  // new streams go to the current device
}

TEST(RuntimeStreams, EmulatedPriorities) {
  EMBER_REQUIRE_EMULATED();  // a GPU's range depends on the GPU
  cuda::Stream on2(2, -1);
  EXPECT_EQ(on2.priority(), -1);
  EXPECT_EQ(cuda::Stream(1, -7).priority(), -1);
  EXPECT_EQ(cuda::Stream(1, 5).priority(), 0);
  EXPECT_EQ(cuda::Stream::priority_range(), (std::pair<int, int>{0, -1}));
}

TEST(RuntimeStreams, Printing) {
  EMBER_REQUIRE_DEVICES(3);
  std::ostringstream d;
  d << cuda::default_stream(1);
  EXPECT_EQ(d.str(), "<ember.cuda.Stream device=cuda:1 cuda_stream=0x0>");
  cuda::Stream s(2);
  std::ostringstream o;
  o << s;
  EXPECT_EQ(o.str().rfind("<ember.cuda.Stream device=cuda:2 cuda_stream=0x", 0), 0u) << o.str();
  EXPECT_NE(o.str(), "<ember.cuda.Stream device=cuda:2 cuda_stream=0x0>");
}

TEST(RuntimeStreams, SetStreamIsPerThreadAndPerDevice) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::Stream s1(1);
  cuda::set_stream(s1);
  EXPECT_EQ(cuda::current_device(), 1);  // as torch.cuda.set_stream: its device becomes current
  EXPECT_EQ(cuda::current_stream(), s1);
  EXPECT_EQ(cuda::current_stream(0), cuda::default_stream(0));
  std::thread([&] {
    EXPECT_EQ(cuda::current_stream(1), cuda::default_stream(1));  // another thread: its own
  }).join();
  cuda::set_stream(cuda::default_stream(1));
  EXPECT_EQ(cuda::current_stream(1), cuda::default_stream(1));
  cuda::set_device(0);
}

TEST(RuntimeStreams, CurrentStreamKeepsTheStreamAlive) {
  EMBER_REQUIRE_DEVICES(1);
  {
    cuda::Stream s(0);
    cuda::set_stream(s);
  }
  cuda::Stream current = cuda::current_stream();
  EXPECT_FALSE(current.is_default());
  current.synchronize();
  cuda::set_stream(cuda::default_stream(0));
}

TEST(RuntimeStreams, StreamGuardRestoresStreamAndDevice) {
  EMBER_REQUIRE_DEVICES(3);
  cuda::Stream s0(0), s2(2), s2b(2);
  cuda::set_stream(s0);
  cuda::set_stream(s2b);
  cuda::set_device(0);
  {
    cuda::StreamGuard g(s2);
    EXPECT_EQ(cuda::current_device(), 2);
    EXPECT_EQ(cuda::current_stream(), s2);
    EXPECT_EQ(cuda::current_stream(0), s0);
    {
      cuda::StreamGuard inner(cuda::default_stream(1));
      EXPECT_EQ(cuda::current_device(), 1);
      EXPECT_EQ(cuda::current_stream(), cuda::default_stream(1));
    }
    EXPECT_EQ(cuda::current_device(), 2);
    EXPECT_EQ(cuda::current_stream(), s2);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_EQ(cuda::current_stream(), s0);
  EXPECT_EQ(cuda::current_stream(2), s2b);
  cuda::set_stream(cuda::default_stream(2));
  cuda::set_stream(cuda::default_stream(0));
}

TEST(RuntimeStreams, WorkRunsInOrder) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream s;
  std::vector<int> order;  // touched only by the stream's worker until synchronize
  for (int i = 0; i < 100; ++i) on_stream(s, [&order, i] { order.push_back(i); });
  s.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(RuntimeStreams, BusyStreamAndIdleStream) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream busy, idle;
  {
    cuda::StreamGuard g(busy);
    cuda::sleep(300ms);
  }
  EXPECT_FALSE(busy.query());
  EXPECT_TRUE(idle.query());  // streams are independent: nothing queued on this one
  on_stream(idle, [] {});
  idle.synchronize();
  EXPECT_TRUE(idle.query());
  EXPECT_FALSE(busy.query());  // the other stream ran while this one was still busy
  busy.synchronize();
  EXPECT_TRUE(busy.query());
}

TEST(RuntimeStreams, HostReturnsBeforeWorkRuns) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream s;
  std::atomic<bool> ran{false};
  {
    cuda::StreamGuard g(s);
    cuda::sleep(200ms);
  }
  on_stream(s, [&] { ran = true; });
  EXPECT_FALSE(ran.load());
  s.synchronize();
  EXPECT_TRUE(ran.load());
}

TEST(RuntimeStreams, WaitStreamOrdersWork) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream s1, s2;
  {
    cuda::StreamGuard g(s1);
    cuda::sleep(200ms);
  }
  std::atomic<bool> s1_done{false};
  on_stream(s1, [&] { s1_done = true; });
  s2.wait_stream(s1);
  bool saw_s1_done = false;
  on_stream(s2, [&] { saw_s1_done = s1_done.load(); });
  cuda::Event e = s2.record_event();
  EXPECT_FALSE(e.query());  // s2 is held back by s1's sleep
  e.synchronize();
  EXPECT_TRUE(saw_s1_done);
  EXPECT_TRUE(s1.query());
}

// WaitStreamOrdersWork without host functions, so that it also runs on a GPU.
TEST(RuntimeStreams, WaitStreamHoldsBackTheWaiter) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Stream s1, s2;
  {
    cuda::StreamGuard g(s1);
    cuda::sleep(200ms);
  }
  s2.wait_stream(s1);
  cuda::Event e = s2.record_event();
  EXPECT_FALSE(e.query());  // s2 is held back by s1's sleep
  cuda::synchronize(0);
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(s1.query());
  EXPECT_TRUE(s2.query());
}

TEST(RuntimeStreams, WaitStreamAcrossDevices) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream s0(0), s3(3);
  {
    cuda::StreamGuard g(s0);
    cuda::sleep(100ms);
  }
  std::atomic<bool> s0_done{false};
  on_stream(s0, [&] { s0_done = true; });
  s3.wait_stream(s0);
  bool seen = false;
  on_stream(s3, [&] { seen = s0_done.load(); });
  s3.synchronize();
  EXPECT_TRUE(seen);
}

TEST(RuntimeStreams, SynchronizeDeviceWaitsForEveryStream) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  cuda::Stream a(1), b(1);
  std::atomic<int> done{0};
  for (auto* s : {&a, &b}) {
    cuda::StreamGuard g(*s);
    cuda::sleep(50ms);
    on_stream(*s, [&] { ++done; });
  }
  cuda::synchronize(1);
  EXPECT_EQ(done.load(), 2);
  EXPECT_TRUE(a.query());
  EXPECT_TRUE(b.query());
}

TEST(RuntimeStreams, WorkQueuedOnADroppedStreamStillRuns) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  std::atomic<int> ran{0};
  {
    cuda::Stream s;
    cuda::StreamGuard g(s);
    cuda::sleep(50ms);
    for (int i = 0; i < 10; ++i) on_stream(s, [&] { ++ran; });
  }  // the last handle goes with work still queued
  cuda::synchronize();
  EXPECT_EQ(ran.load(), 10);
}

// Several host threads enqueue onto one stream at once (Note [Emulated stream producers]):
// each thread's work runs in the order it was queued, kernels and host functions alike,
// and none is lost. Each thread adds 1 to its own tensor, then queues a host function
// that reads the tensor on the worker: it must see exactly the adds queued before it.
TEST(RuntimeStreams, SeveralHostThreadsEnqueueOnOneStream) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  constexpr int kThreads = 4, kLaunches = 500;
  cuda::Stream s;
  ember::Tensor one = ember::ones({16}, "cuda:0");
  std::vector<ember::Tensor> counts;
  for (int t = 0; t < kThreads; ++t) counts.push_back(ember::zeros({16}, "cuda:0"));
  s.wait_stream(cuda::current_stream());           // the tensors are filled on the default stream
  std::vector<std::vector<float>> seen(kThreads);  // written on the worker, read after synchronize
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cuda::StreamGuard guard(s);
      auto* count = static_cast<const float*>(counts[static_cast<size_t>(t)].data_ptr());
      for (int i = 0; i < kLaunches; ++i) {
        counts[static_cast<size_t>(t)].add_(one);
        on_stream(s, [&seen, t, count] { seen[static_cast<size_t>(t)].push_back(count[0]); });
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  s.synchronize();
  for (int t = 0; t < kThreads; ++t) {
    const std::vector<float>& values = seen[static_cast<size_t>(t)];
    ASSERT_EQ(values.size(), static_cast<size_t>(kLaunches)) << "thread " << t;
    for (int i = 0; i < kLaunches; ++i) ASSERT_EQ(values[static_cast<size_t>(i)], i + 1.0f) << "thread " << t;
    EXPECT_EQ(counts[static_cast<size_t>(t)].cpu().data_ptr<float>()[15], static_cast<float>(kLaunches));
  }
}

// A host thread enqueues while another synchronizes the stream and records events on it:
// each synchronize returns only once everything queued before it has run, and each event
// completes after the work queued before its recording. The producer pauses now and then
// so that the worker goes to sleep and enqueues race with waking it (not needed for the
// checks to hold).
TEST(RuntimeStreams, EnqueueRacesWithSynchronize) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  constexpr int kLaunches = 3000;
  cuda::Stream s;
  std::atomic<int> queued{0}, ran{0};
  std::atomic<bool> done{false};
  std::thread producer([&] {
    cuda::StreamGuard guard(s);
    ember::Tensor x = ember::zeros({16}, "cuda:0");
    for (int i = 0; i < kLaunches; ++i) {
      x.add_(x);
      on_stream(s, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
      queued.store(i + 1, std::memory_order_release);
      if (i % 500 == 0) std::this_thread::sleep_for(200us);
    }
    done = true;
  });
  int checks = 0;
  while (!done.load() || checks == 0) {
    int before = queued.load(std::memory_order_acquire);
    if (checks % 2 == 0) {
      s.synchronize();
    } else {
      cuda::Event event;
      event.record(s);
      event.synchronize();
    }
    ASSERT_GE(ran.load(std::memory_order_relaxed), before) << "check " << checks;
    ++checks;
  }
  producer.join();
  s.synchronize();
  EXPECT_EQ(ran.load(), kLaunches);
  EXPECT_TRUE(s.query());
}

TEST(RuntimeStreams, SleepRejectsNegativeDurations) {
  EMBER_REQUIRE_DEVICES(1);
  EXPECT_THROW(cuda::sleep(-1ns), ember::ValueError);
}

TEST(RuntimeStreams, ContextHotPath) {
  EMBER_REQUIRE_DEVICES(3);
  cuda::Stream s(2);
  EXPECT_EQ(ember::detail::current_stream_state(2), cuda::default_stream(2).state());
  cuda::set_stream(s);
  EXPECT_EQ(ember::detail::current_stream_state(2), s.state());
  EXPECT_EQ(ember::detail::default_stream_state(2), cuda::default_stream(2).state());
  EXPECT_THROW(ember::detail::current_stream_state(cuda::device_count()), ember::IndexError);
  cuda::set_stream(cuda::default_stream(2));
  cuda::set_device(0);
}

}  // namespace
