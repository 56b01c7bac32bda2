// RaceDetector driven with made-up stream, event and memory ids: the scenarios of
// PyTorch's test/test_cuda_sanitizer.py (TestEventHandler), plus the synchronisations
// and allocation rules of Note [Stream race detection]. Needs no device.
#include <gtest/gtest.h>

#include <vector>

#include "sanitizer/race_detector.h"

namespace ember::detail::sanitizer {
namespace {

// Ids as PyTorch's test builds them: distinct ranges for streams, events and tensors.
StreamKey stream_id(int i) { return 1000 + static_cast<StreamKey>(i); }
EventKey event_id(int i) { return 2000 + static_cast<EventKey>(i); }
uintptr_t tensor_id(int i) { return 0x10000 + 0x100 * static_cast<uintptr_t>(i); }  // 0x100 bytes each

class DetectorTest : public ::testing::Test {
 protected:
  std::vector<DataRace> kernel_launch(StreamKey stream, const std::vector<int>& read_only,
                                      const std::vector<int>& read_write) {
    std::vector<MemoryAccess> accesses;
    for (int t : read_only) accesses.push_back({tensor_id(t), tensor_id(t) + 0x100, AccessType::Read, "input", -1});
    for (int t : read_write) {
      accesses.push_back({tensor_id(t), tensor_id(t) + 0x100, AccessType::Read, "input", -1});
      accesses.push_back({tensor_id(t), tensor_id(t) + 0x100, AccessType::Write, "output", -1});
    }
    std::vector<DataRace> races = detector.check(stream, accesses, "kernel", nullptr);
    detector.record(stream, accesses, "kernel", nullptr);
    return races;
  }
  void good(StreamKey stream, const std::vector<int>& read_only, const std::vector<int>& read_write = {}) {
    EXPECT_TRUE(kernel_launch(stream, read_only, read_write).empty());
  }
  void bad(StreamKey stream, const std::vector<int>& read_only, const std::vector<int>& read_write = {}) {
    EXPECT_FALSE(kernel_launch(stream, read_only, read_write).empty());
  }

  RaceDetector detector;
};

TEST_F(DetectorTest, EmptyKernelLaunch) { good(stream_id(0), {}); }

TEST_F(DetectorTest, SimplePassing) {
  good(stream_id(1), {1});
  good(stream_id(2), {1});
}

TEST_F(DetectorTest, SimpleError) {
  good(stream_id(1), {1});
  bad(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, SimpleSync) {
  good(stream_id(1), {1});
  detector.event_record(event_id(0), stream_id(1));
  detector.event_wait(stream_id(2), event_id(0));
  good(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, ReadsCheckLastWrite) {
  good(stream_id(1), {}, {1});
  detector.event_record(event_id(0), stream_id(1));
  detector.event_wait(stream_id(2), event_id(0));
  good(stream_id(2), {1});
  bad(stream_id(3), {1});
}

TEST_F(DetectorTest, BranchSync) {
  // Two streams may read after both waited for a third, but not write without more sync.
  good(stream_id(1), {}, {1});
  detector.event_record(event_id(0), stream_id(1));
  detector.event_wait(stream_id(2), event_id(0));
  detector.event_wait(stream_id(3), event_id(0));
  good(stream_id(2), {1});
  good(stream_id(3), {1});
  bad(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, ChainSync) {
  const int iterations = 10;
  good(stream_id(0), {1});
  for (int i = 0; i < iterations; ++i) {
    detector.event_record(event_id(i), stream_id(i));
    detector.event_wait(stream_id(i + 1), event_id(i));
  }
  good(stream_id(iterations), {}, {1});
}

TEST_F(DetectorTest, ExpiredRecord) {
  good(stream_id(1), {1});
  detector.event_record(event_id(0), stream_id(1));
  good(stream_id(1), {1});
  detector.event_wait(stream_id(2), event_id(0));
  bad(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, DeletedRecord) {
  for (auto [should_delete, should_create] : {std::pair{true, true}, {true, false}, {false, true}}) {
    SCOPED_TRACE(::testing::Message() << "delete " << should_delete << " create " << should_create);
    detector.reset();
    good(stream_id(1), {1});
    detector.event_record(event_id(0), stream_id(1));
    if (should_delete) detector.event_destroyed(event_id(0));
    if (should_create) detector.event_created(event_id(0));
    detector.event_wait(stream_id(2), event_id(0));
    bad(stream_id(2), {}, {1});
  }
}

TEST_F(DetectorTest, AllReadsCheckedFailing) {
  const int iterations = 10;
  for (int i = 1; i <= iterations; ++i) {
    good(stream_id(i), {1});
    detector.event_record(event_id(i), stream_id(i));
  }
  for (int i = 1; i < iterations; ++i) detector.event_wait(stream_id(0), event_id(i));
  bad(stream_id(0), {}, {1});  // stream `iterations` was not waited for
}

TEST_F(DetectorTest, AllReadsCheckedPassing) {
  const int iterations = 10;
  for (int i = 1; i < iterations; ++i) {
    good(stream_id(i), {1});
    detector.event_record(event_id(i), stream_id(i));
  }
  for (int i = 1; i < iterations; ++i) detector.event_wait(stream_id(0), event_id(i));
  good(stream_id(0), {}, {1});
}

TEST_F(DetectorTest, MultipleErrors) {
  const int iterations = 10;
  std::vector<int> all;
  for (int i = 0; i < iterations; ++i) all.push_back(i);
  good(stream_id(0), {}, all);
  EXPECT_EQ(kernel_launch(stream_id(1), {}, all).size(), static_cast<size_t>(iterations));
}

TEST_F(DetectorTest, CorrectStateMerging) {
  // After a wait, a stream's clock is the pointwise maximum of its own and the event's.
  good(stream_id(1), {}, {1});
  good(stream_id(2), {}, {2});
  detector.event_record(event_id(1), stream_id(1));
  detector.event_record(event_id(2), stream_id(2));
  good(stream_id(1), {}, {1});
  good(stream_id(2), {}, {2});
  detector.event_wait(stream_id(2), event_id(1));
  detector.event_wait(stream_id(1), event_id(2));
  detector.event_record(event_id(3), stream_id(2));
  detector.event_wait(stream_id(1), event_id(3));
  good(stream_id(1), {}, {1, 2});
}

TEST_F(DetectorTest, RecordOverride) {
  good(stream_id(1), {1});
  good(stream_id(2), {2});
  detector.event_record(event_id(1), stream_id(1));
  detector.event_record(event_id(1), stream_id(2));
  detector.event_wait(stream_id(3), event_id(1));
  bad(stream_id(3), {}, {1});
}

TEST_F(DetectorTest, MultipleWait) {
  good(stream_id(1), {}, {1});
  detector.event_record(event_id(1), stream_id(1));
  detector.event_wait(stream_id(2), event_id(1));
  detector.event_wait(stream_id(3), event_id(1));
  good(stream_id(2), {1});
  good(stream_id(3), {1});
}

TEST_F(DetectorTest, MultipleReadsFromManyStreamsThenWriteAfterRead) {
  good(stream_id(1), {1});
  good(stream_id(2), {1});
  good(stream_id(3), {1});
  std::vector<DataRace> races = kernel_launch(stream_id(4), {}, {1});
  ASSERT_EQ(races.size(), 1u);  // one report per range
  EXPECT_EQ(races[0].current.type, AccessType::Write);
  EXPECT_EQ(races[0].previous.type, AccessType::Read);
}

TEST_F(DetectorTest, StreamSynchronize) {
  good(stream_id(1), {}, {1});
  detector.stream_synchronize(stream_id(1));
  good(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, StreamSynchronizeCoversWhatTheStreamWaitedFor) {
  good(stream_id(1), {}, {1});
  detector.event_record(event_id(0), stream_id(1));
  detector.event_wait(stream_id(2), event_id(0));
  detector.stream_synchronize(stream_id(2));
  good(stream_id(3), {}, {1});
}

TEST_F(DetectorTest, EventSynchronize) {
  good(stream_id(1), {}, {1});
  detector.event_record(event_id(0), stream_id(1));
  good(stream_id(1), {}, {2});  // after the record: not covered
  detector.event_synchronize(event_id(0));
  good(stream_id(2), {}, {1});
  bad(stream_id(2), {}, {2});
}

TEST_F(DetectorTest, DeviceSynchronize) {
  detector.stream_created(stream_id(1), 0);
  detector.stream_created(stream_id(2), 0);
  detector.stream_created(stream_id(3), 1);
  good(stream_id(1), {}, {1});
  good(stream_id(2), {}, {2});
  good(stream_id(3), {}, {3});
  detector.device_synchronize(0);
  good(stream_id(4), {}, {1, 2});
  bad(stream_id(4), {}, {3});  // device 1 was not synchronised
}

TEST_F(DetectorTest, StreamDestructionWaitsForItsWork) {
  good(stream_id(1), {}, {1});
  detector.stream_destroyed(stream_id(1));
  good(stream_id(2), {}, {1});
}

TEST_F(DetectorTest, AllocationStartsAFreshHistory) {
  good(stream_id(1), {}, {1});
  detector.memory_deallocation(tensor_id(1), 0x100);
  detector.memory_allocation(tensor_id(1), 0x100);  // the block reused
  good(stream_id(2), {}, {1});
  EXPECT_EQ(detector.range_count(), 1u);
}

TEST_F(DetectorTest, ReleaseOfALargerSegmentErasesEveryRangeInside) {
  good(stream_id(1), {}, {1});
  good(stream_id(2), {}, {2});
  detector.memory_deallocation(tensor_id(1), 0x200);  // the segment given back to the system
  EXPECT_EQ(detector.range_count(), 0u);
  good(stream_id(3), {}, {1, 2});
}

TEST_F(DetectorTest, OverlappingViewsRaceDisjointOnesDoNot) {
  detector.memory_allocation(0x1000, 0x100);
  auto write = [&](StreamKey s, uintptr_t begin, uintptr_t end) {
    std::vector<MemoryAccess> accesses{{begin, end, AccessType::Write, "output", -1}};
    auto races = detector.check(s, accesses, "fill_", nullptr);
    detector.record(s, accesses, "fill_", nullptr);
    return races.size();
  };
  EXPECT_EQ(write(stream_id(1), 0x1000, 0x1080), 0u);
  EXPECT_EQ(write(stream_id(2), 0x1040, 0x1100), 1u);  // [0x1040, 0x1080) is written by both
  EXPECT_EQ(write(stream_id(2), 0x1080, 0x1100), 0u);  // only its own bytes: no race
  // Memory no allocator reported gets a range per access.
  EXPECT_EQ(write(stream_id(1), 0x9000, 0x9040), 0u);
  EXPECT_EQ(write(stream_id(2), 0x9040, 0x9080), 0u);
  EXPECT_EQ(write(stream_id(2), 0x9000, 0x9010), 1u);
}

TEST_F(DetectorTest, CheckChangesNothing) {
  good(stream_id(1), {}, {1});
  std::vector<MemoryAccess> accesses{{tensor_id(1), tensor_id(1) + 4, AccessType::Write, "output", -1}};
  EXPECT_EQ(detector.check(stream_id(2), accesses, "add", nullptr).size(), 1u);
  EXPECT_EQ(detector.check(stream_id(2), accesses, "add", nullptr).size(), 1u);
  detector.stream_synchronize(stream_id(1));
  EXPECT_TRUE(detector.check(stream_id(2), accesses, "add", nullptr).empty());
}

TEST_F(DetectorTest, RaceNamesBothAccesses) {
  detector.stream_created(stream_id(7), 2);
  good(stream_id(7), {}, {1});
  std::vector<MemoryAccess> accesses{{tensor_id(1) + 8, tensor_id(1) + 16, AccessType::Read, "input", 1}};
  std::vector<DataRace> races = detector.check(stream_id(8), accesses, "mul", nullptr);
  ASSERT_EQ(races.size(), 1u);
  EXPECT_EQ(races[0].pointer, tensor_id(1) + 8);  // the racing operand's own pointer
  EXPECT_STREQ(races[0].current.op, "mul");
  EXPECT_STREQ(races[0].current.argument, "input");
  EXPECT_EQ(races[0].current.index, 1);
  EXPECT_EQ(races[0].current.type, AccessType::Read);
  EXPECT_EQ(races[0].previous.type, AccessType::Write);
  EXPECT_STREQ(races[0].previous.op, "kernel");
  EXPECT_EQ(races[0].previous_stream.number, 0u);
  EXPECT_EQ(races[0].previous_stream.device, 2);
  EXPECT_EQ(races[0].current_stream.number, 1u);
}

}  // namespace
}  // namespace ember::detail::sanitizer
