// Events: lazy creation, record/wait/query/synchronize, timing and its errors, device
// rules, events that outlive their stream, and reset_device invalidation.
#include "runtime/registry.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::testing::error_of;
using namespace std::chrono_literals;

namespace {

TEST(RuntimeEvents, UnrecordedEvent) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Event e;
  EXPECT_FALSE(e.is_recorded());
  EXPECT_EQ(e.device_index(), -1);
  EXPECT_TRUE(e.query());
  e.synchronize();
  e.wait();  // nothing to wait for
}

TEST(RuntimeEvents, DeviceComesFromTheFirstRecordingStream) {
  EMBER_REQUIRE_DEVICES(3);
  cuda::Event e;
  cuda::Stream s(2);
  e.record(s);
  EXPECT_TRUE(e.is_recorded());
  EXPECT_EQ(e.device_index(), 2);
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_EQ(error_of<ember::ValueError>([&] { e.record(cuda::Stream(1)); }),
            "Event device 2 does not match recording stream's device 1.");
  e.record(cuda::default_stream(2));  // same device: fine
  e.synchronize();
}

TEST(RuntimeEvents, QueryAndSynchronizeFollowTheStream) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Stream s;
  cuda::StreamGuard g(s);
  cuda::sleep(200ms);
  cuda::Event e;
  e.record();
  EXPECT_FALSE(e.query());
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(s.query());
}

TEST(RuntimeEvents, ReRecordingMovesTheMarker) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Stream s;
  cuda::Event e;
  e.record(s);
  e.synchronize();
  {
    cuda::StreamGuard g(s);
    cuda::sleep(200ms);
  }
  e.record(s);
  EXPECT_FALSE(e.query());
  e.synchronize();
}

TEST(RuntimeEvents, ElapsedTimeCoversTheSleep) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Event start(true), end(true);
  cuda::Stream s;
  cuda::StreamGuard g(s);
  start.record();
  cuda::sleep(30ms);
  end.record();
  end.synchronize();
  float ms = start.elapsed_time(end);
  EXPECT_GE(ms, 30.0f);
  EXPECT_LT(ms, 5000.0f);
}

TEST(RuntimeEvents, ElapsedTimeErrors) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Event plain, timed(true), timed2(true);
  EXPECT_EQ(error_of<ember::ValueError>([&] { plain.elapsed_time(timed); }),
            "Both events must be created with argument 'enable_timing=True'.");
  EXPECT_EQ(error_of<ember::ValueError>([&] { timed.elapsed_time(timed2); }),
            "Both events must be recorded before calculating elapsed time.");
  cuda::Stream s;
  timed.record(s);
  {
    cuda::StreamGuard g(s);
    cuda::sleep(300ms);
  }
  timed2.record(s);
  EXPECT_EQ(error_of<ember::ValueError>([&] { timed.elapsed_time(timed2); }),
            "Both events must be completed before calculating elapsed time.");
  timed2.synchronize();
  EXPECT_GE(timed.elapsed_time(timed2), 300.0f);
}

TEST(RuntimeEvents, WaitMakesAnotherStreamWait) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::Stream producer(0), consumer(1);
  cuda::Event ready;
  {
    cuda::StreamGuard g(producer);
    cuda::sleep(150ms);
    ready.record();
  }
  ready.wait(consumer);
  cuda::Event after = consumer.record_event();
  EXPECT_FALSE(after.query());
  after.synchronize();
  EXPECT_TRUE(ready.query());
  // Stream::wait_event is the same operation seen from the stream.
  cuda::Event again = producer.record_event();
  consumer.wait_event(again);
  consumer.synchronize();
  EXPECT_TRUE(again.query());
}

TEST(RuntimeEvents, EventOutlivesItsStream) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::Event e(true);
  cuda::Event start(true);
  {
    cuda::Stream s(1);
    start.record(s);
    cuda::StreamGuard g(s);
    cuda::sleep(50ms);
    e.record(s);
  }  // the handle goes at once, work still queued; the event stays valid
  e.synchronize();
  EXPECT_TRUE(e.query());
  cuda::Stream other(1);
  e.wait(other);
  other.synchronize();
  EXPECT_GE(start.elapsed_time(e), 50.0f);
}

TEST(RuntimeEvents, RecordEventWithAGivenEvent) {
  EMBER_REQUIRE_DEVICES(4);
  cuda::Stream s(3);
  cuda::Event e(true);
  cuda::Event returned = s.record_event(e);
  EXPECT_EQ(returned.device_index(), 3);
  EXPECT_EQ(e.device_index(), 3);
  returned.synchronize();
}

TEST(RuntimeEvents, ResetDeviceInvalidatesOldStreamsAndEvents) {
  EMBER_REQUIRE_DEVICES(4);
  int hooked = -1;
  static int* hook_target = nullptr;
  hook_target = &hooked;
  ember::detail::set_device_reset_hook([](int device) { *hook_target = device; });

  cuda::Stream old_stream(3);
  cuda::Event old_event = old_stream.record_event();
  cuda::Event unrecorded;
  cuda::set_stream(old_stream);
  cuda::Stream survivor(2);  // another device: untouched
  cuda::reset_device(3);
  EXPECT_EQ(hooked, 3);
  ember::detail::set_device_reset_hook(nullptr);

  std::string message = error_of<ember::CudaError>([&] { old_stream.synchronize(); });
  EXPECT_NE(message.find("created on cuda:3 before the device was reset"), std::string::npos) << message;
  EXPECT_THROW(old_stream.query(), ember::CudaError);
  message = error_of<ember::CudaError>([&] { old_event.query(); });
  EXPECT_NE(message.find("event was created on cuda:3 before the device was reset"), std::string::npos) << message;
  EXPECT_THROW(old_event.wait(cuda::default_stream(3)), ember::CudaError);
  EXPECT_THROW(cuda::set_stream(old_stream), ember::CudaError);
  // The thread's current stream on the device falls back to the default stream.
  EXPECT_EQ(cuda::current_stream(3), cuda::default_stream(3));
  // Default streams, new streams and never-recorded events work.
  cuda::default_stream(3).synchronize();
  cuda::Stream fresh(3);
  unrecorded.record(fresh);
  unrecorded.synchronize();
  survivor.synchronize();
  cuda::set_device(0);
}

}  // namespace
