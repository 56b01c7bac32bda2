// Many host threads x many streams enqueuing, recording and waiting at once; meant to
// run under ThreadSanitizer (-DEMBER_SANITIZE=thread) as well.
#include <atomic>
#include <thread>
#include <vector>

#include "emulated_support.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::testing::on_stream;
using namespace std::chrono_literals;

namespace {

TEST(RuntimeStress, ThreadsStreamsEvents) {
  EMBER_REQUIRE_EMULATED();  // queues host functions
  constexpr int kThreads = 8, kStreamsPerThread = 4, kRounds = 500;
  // One counter per stream, incremented only by that stream's worker. Stream 0 of each
  // thread reads the others' after waiting on their events: without the ordering the
  // waits give, it would see too small a count. (Atomic, since the next round's
  // increments legitimately run while stream 0 reads.)
  std::vector<std::atomic<int>> counters(kThreads * kStreamsPerThread);
  std::atomic<int> cross_checks_failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cuda::set_device(t % cuda::device_count());
      std::vector<cuda::Stream> streams;
      for (int i = 0; i < kStreamsPerThread; ++i) streams.emplace_back((t + i) % cuda::device_count());
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kStreamsPerThread; ++i) {
          std::atomic<int>* counter = &counters[t * kStreamsPerThread + i];
          on_stream(streams[i], [counter] { counter->fetch_add(1, std::memory_order_relaxed); });
        }
        // Stream 0 waits for the others, then checks that their increments happened.
        cuda::Event marks[kStreamsPerThread];
        for (int i = 1; i < kStreamsPerThread; ++i) {
          marks[i].record(streams[i]);
          streams[0].wait_event(marks[i]);
        }
        std::vector<std::atomic<int>*> others;
        for (int i = 1; i < kStreamsPerThread; ++i) others.push_back(&counters[t * kStreamsPerThread + i]);
        on_stream(streams[0], [others, round, &cross_checks_failed] {
          for (auto* c : others) {
            if (c->load(std::memory_order_relaxed) < round + 1) ++cross_checks_failed;
          }
        });
        if (round % 50 == 0) {
          cuda::StreamGuard g(streams[round % kStreamsPerThread]);
          cuda::sleep(100us);
          cuda::Event e;
          e.record();
          e.query();
        }
        if (round % 64 == 0) {
          cuda::Stream temporary(round % cuda::device_count());  // made and dropped with work queued
          on_stream(temporary, [] {});
        }
      }
      for (auto& s : streams) s.synchronize();
    });
  }
  for (auto& th : threads) th.join();
  for (int d = 0; d < cuda::device_count(); ++d) cuda::synchronize(d);
  EXPECT_EQ(cross_checks_failed.load(), 0);
  for (auto& c : counters) EXPECT_EQ(c.load(), kRounds);
}

}  // namespace
