// RaceDetector by byte ranges (Note [Access footprints] in sanitizer/race_detector.h):
// disjoint parts of one block do not race, strided operands are told apart by their
// period and phase where one period proves it, and only there; freed blocks keep what
// their allocator cannot order (Note [Freed blocks]); the host is checked against what
// it synchronised with (Note [Host accesses]). Needs no device.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/kernel_call.h"
#include "sanitizer/race_detector.h"
#include "sanitizer/sanitizing_backend.h"

namespace ember::detail::sanitizer {
namespace {

StreamKey stream_id(int i) { return 1000 + static_cast<StreamKey>(i); }
constexpr uintptr_t kBlock = 0x10000;  // a 0x400-byte block: 256 floats

class RangesTest : public ::testing::Test {
 protected:
  // A float operand of kBlock: `offset`, `sizes` and `strides` in elements.
  static MemoryAccess operand(int64_t offset, IntList sizes, IntList strides, AccessType type) {
    TensorArg arg{reinterpret_cast<void*>(kBlock + 4 * offset), kFloat32, std::move(sizes), std::move(strides)};
    return access_of(arg, type, type == AccessType::Write ? "output" : "input", -1);
  }
  size_t launch(StreamKey stream, const std::vector<MemoryAccess>& accesses) {
    std::vector<DataRace> races = detector.check(stream, accesses, "kernel", nullptr);
    detector.record(stream, accesses, "kernel", nullptr);
    return races.size();
  }
  size_t write(StreamKey stream, int64_t offset, IntList sizes, IntList strides) {
    return launch(stream, {operand(offset, std::move(sizes), std::move(strides), AccessType::Write)});
  }
  size_t read(StreamKey stream, int64_t offset, IntList sizes, IntList strides) {
    return launch(stream, {operand(offset, std::move(sizes), std::move(strides), AccessType::Read)});
  }

  RaceDetector detector;
};

TEST_F(RangesTest, FootprintOfContiguousAndStridedOperands) {
  MemoryAccess whole = operand(0, {16, 16}, {16, 1}, AccessType::Write);
  EXPECT_EQ(whole.begin, kBlock);
  EXPECT_EQ(whole.end, kBlock + 0x400);
  EXPECT_TRUE(whole.footprint.dense());
  MemoryAccess odd = operand(1, {128}, {2}, AccessType::Write);  // x[1::2]
  EXPECT_EQ(odd.begin, kBlock + 4);
  EXPECT_EQ(odd.end, kBlock + 0x400);
  EXPECT_EQ(odd.footprint.period, 8u);
  EXPECT_EQ(odd.footprint.phase, (kBlock + 4) % 8);
  EXPECT_EQ(odd.footprint.width, 4u);
  MemoryAccess columns = operand(2, {16, 3}, {16, 1}, AccessType::Write);  // x[:, 2:5]
  EXPECT_EQ(columns.footprint.period, 64u);
  EXPECT_EQ(columns.footprint.width, 12u);
  MemoryAccess flipped = operand(15, {16}, {-1}, AccessType::Read);  // reversed: the same 16 elements
  EXPECT_EQ(flipped.begin, kBlock);
  EXPECT_EQ(flipped.end, kBlock + 64);
  EXPECT_TRUE(flipped.footprint.dense());
  MemoryAccess broadcast = operand(0, {8, 4}, {0, 1}, AccessType::Read);  // stride 0: 4 elements
  EXPECT_EQ(broadcast.end, kBlock + 16);
  EXPECT_TRUE(broadcast.footprint.dense());
}

TEST_F(RangesTest, DisjointHalvesOfOneBlockDoNotRace) {
  EXPECT_EQ(write(stream_id(1), 0, {128}, {1}), 0u);
  EXPECT_EQ(write(stream_id(2), 128, {128}, {1}), 0u);
  EXPECT_EQ(read(stream_id(2), 64, {64}, {1}), 1u);  // stream 1's half
  EXPECT_EQ(read(stream_id(1), 127, {2}, {1}), 1u);  // one element of each half: stream 2's races
  EXPECT_EQ(detector.check(stream_id(3), {operand(0, {256}, {1}, AccessType::Write)}, "fill_", nullptr).size(), 1u);
}

TEST_F(RangesTest, AFlatBucketFilledFromTwoStreams) {
  // Gradients of different sizes copied into their slots of one flat buffer, then all-reduced
  // on a third stream that waited for neither: every slot races, each operand reported once.
  const std::vector<std::pair<int64_t, int64_t>> slots{{0, 10}, {10, 100}, {110, 6}, {116, 140}};
  for (size_t i = 0; i < slots.size(); ++i)
    EXPECT_EQ(write(stream_id(1 + static_cast<int>(i % 2)), slots[i].first, {slots[i].second}, {1}), 0u) << i;
  EXPECT_EQ(read(stream_id(3), 0, {256}, {1}), 1u);
  detector.stream_synchronize(stream_id(1));
  detector.stream_synchronize(stream_id(2));
  EXPECT_EQ(read(stream_id(3), 0, {256}, {1}), 0u);
}

TEST_F(RangesTest, InterleavedElementsOfOnePeriodDoNotRace) {
  EXPECT_EQ(write(stream_id(1), 0, {128}, {2}), 0u);  // x[::2]
  EXPECT_EQ(write(stream_id(2), 1, {128}, {2}), 0u);  // x[1::2]
  // x.view(16, 16)[:, :2] meets both
  EXPECT_EQ(detector.check(stream_id(3), {operand(0, {16, 2}, {16, 1}, AccessType::Read)}, "k", nullptr).size(), 1u);
  EXPECT_EQ(read(stream_id(2), 1, {64}, {4}), 0u);  // x[1::4] is inside stream 2's own
  EXPECT_EQ(read(stream_id(1), 2, {64}, {4}), 0u);  // x[2::4] inside stream 1's
  EXPECT_EQ(read(stream_id(1), 3, {64}, {4}), 1u);  // x[3::4] is stream 2's
}

TEST_F(RangesTest, ColumnsOfAMatrixFromTwoStreams) {
  EXPECT_EQ(write(stream_id(1), 0, {16, 8}, {16, 1}), 0u);  // x.view(16, 16)[:, :8]
  EXPECT_EQ(write(stream_id(2), 8, {16, 8}, {16, 1}), 0u);  // x.view(16, 16)[:, 8:]
  EXPECT_EQ(read(stream_id(2), 7, {16, 2}, {16, 1}), 1u);   // columns 7 and 8
}

TEST_F(RangesTest, EvenAndOddColumnsOfAMatrix) {
  EXPECT_EQ(write(stream_id(1), 0, {16, 8}, {16, 2}), 0u);  // x.view(16, 16)[:, ::2]
  EXPECT_EQ(write(stream_id(2), 1, {16, 8}, {16, 2}), 0u);  // x.view(16, 16)[:, 1::2]
  detector.stream_synchronize(stream_id(1));
  detector.stream_synchronize(stream_id(2));
  // With 15 columns no single period holds the pattern: compared by span (conservative).
  EXPECT_EQ(write(stream_id(3), 0, {16, 8}, {15, 2}), 0u);
  EXPECT_EQ(write(stream_id(4), 1, {16, 7}, {15, 2}), 1u);
}

TEST_F(RangesTest, DifferentPeriodsAreTreatedAsOverlapping) {
  // x[::4] and x[1::6] share no element, but periods 16 and 24 bytes are not multiples:
  // reported (conservative), as is x[::2] against x[1::3], which do share elements.
  EXPECT_EQ(write(stream_id(1), 0, {64}, {4}), 0u);
  EXPECT_EQ(detector.check(stream_id(2), {operand(1, {42}, {6}, AccessType::Write)}, "k", nullptr).size(), 1u);
  EXPECT_EQ(write(stream_id(1), 0, {128}, {2}), 0u);
  EXPECT_EQ(detector.check(stream_id(2), {operand(1, {85}, {3}, AccessType::Write)}, "k", nullptr).size(), 1u);
}

TEST_F(RangesTest, AWriteKeepsTheRecordsItDoesNotCover) {
  EXPECT_EQ(write(stream_id(1), 0, {128}, {2}), 0u);  // even elements
  detector.stream_synchronize(stream_id(1));
  EXPECT_EQ(read(stream_id(2), 0, {128}, {2}), 0u);   // stream 2 reads them
  EXPECT_EQ(write(stream_id(3), 1, {128}, {2}), 0u);  // odd elements: stream 2's read stays
  EXPECT_EQ(write(stream_id(3), 0, {256}, {1}), 1u);  // the whole block races with it
}

TEST_F(RangesTest, AFreedBlockKeepsOnlyWhatItsAllocatorCannotOrder) {
  EXPECT_EQ(write(stream_id(1), 0, {256}, {1}), 0u);  // the owner fills the block
  detector.stream_synchronize(stream_id(1));
  EXPECT_EQ(read(stream_id(2), 0, {128}, {1}), 0u);    // a side stream reads half, unrecorded
  EXPECT_EQ(read(stream_id(3), 128, {128}, {1}), 0u);  // another reads the other half, recorded
  detector.block_freed(kBlock, 0x400, stream_id(1), {stream_id(3)});
  detector.memory_allocation(kBlock, 0x400);
  EXPECT_EQ(write(stream_id(1), 128, {128}, {1}), 0u);  // the allocator waits for stream 3
  EXPECT_EQ(detector.check(stream_id(1), {operand(0, {256}, {1}, AccessType::Write)}, "fill_", nullptr).size(), 1u);
  detector.stream_synchronize(stream_id(2));
  EXPECT_EQ(write(stream_id(1), 0, {256}, {1}), 0u);
}

TEST_F(RangesTest, AFreeAfterTheOwnerWaitedLeavesNothingToReport) {
  EXPECT_EQ(read(stream_id(2), 0, {256}, {1}), 0u);
  detector.event_record(1, stream_id(2));
  detector.event_wait(stream_id(1), 1);
  detector.block_freed(kBlock, 0x400, stream_id(1), {});
  EXPECT_EQ(write(stream_id(1), 0, {256}, {1}), 0u);
  // A block whose users were all ordered keeps no range at all.
  detector.block_freed(kBlock, 0x400, stream_id(1), {});
  EXPECT_EQ(detector.range_count(), 0u);
}

TEST_F(RangesTest, TheHostIsCheckedAgainstWhatItSynchronisedWith) {
  EXPECT_EQ(write(stream_id(1), 0, {128}, {1}), 0u);   // a copy into pinned memory
  EXPECT_EQ(read(stream_id(2), 128, {128}, {1}), 0u);  // a copy from pinned memory
  auto host = [&](int64_t offset, int64_t n, AccessType type) {
    return detector.check_host({operand(offset, {n}, {1}, type)}, "data_ptr");
  };
  std::vector<DataRace> races = host(0, 4, AccessType::Read);
  ASSERT_EQ(races.size(), 1u);
  EXPECT_TRUE(races[0].current_stream.is_host);
  EXPECT_EQ(races[0].previous.type, AccessType::Write);
  EXPECT_EQ(races[0].previous_stream.key, stream_id(1));
  EXPECT_TRUE(host(128, 4, AccessType::Read).empty());    // reading what a copy reads is fine
  EXPECT_EQ(host(128, 4, AccessType::Write).size(), 1u);  // writing it is not
  detector.stream_synchronize(stream_id(1));
  detector.event_record(1, stream_id(2));
  detector.event_synchronize(1);
  EXPECT_TRUE(host(0, 256, AccessType::Write).empty());
}

}  // namespace
}  // namespace ember::detail::sanitizer
