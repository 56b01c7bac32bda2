// Caching allocator statistics, peak/accumulated resets, the PyTorch-schema snapshot,
// the allocation history and the memory_summary table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "memory/device_stats.h"
#include "test_caching_allocator_fixture.h"

namespace ember::testing {
namespace {

using nlohmann::json;

TEST_P(CachingAllocatorTest, MemoryStatsHasEveryPyTorchKey) {
  const auto stats = alloc().stats().to_map();
  for (const char* name : {"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
                           "active_bytes", "inactive_split_bytes", "requested_bytes"})
    for (const char* pool : {"all", "small_pool", "large_pool"})
      for (const char* field : {"current", "peak", "allocated", "freed"})
        EXPECT_TRUE(stats.count(std::string(name) + "." + pool + "." + field)) << name << "." << pool << "." << field;
  for (const char* key : {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                          "num_device_free", "max_split_size"})
    EXPECT_TRUE(stats.count(key)) << key;
  for (const char* name : {"oversize_allocations", "oversize_segments"})
    for (const char* field : {"current", "peak", "allocated", "freed"})
      EXPECT_TRUE(stats.count(std::string(name) + "." + field)) << name << "." << field;
  EXPECT_EQ(stats.size(), 9u * 3 * 4 + 6 + 2 * 4);
}

TEST_P(CachingAllocatorTest, PeaksAndTheirReset) {
  void* a = alloc().malloc(12 * MiB, s0);
  void* b = alloc().malloc(12 * MiB, s0);
  alloc().free(a);
  EXPECT_EQ(stat("allocated_bytes.all.peak"), int64_t(24 * MiB));
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(12 * MiB));
  EXPECT_EQ(stat("allocated_bytes.all.allocated"), int64_t(24 * MiB));
  EXPECT_EQ(stat("allocated_bytes.all.freed"), int64_t(12 * MiB));
  EXPECT_EQ(stat("reserved_bytes.all.peak"), int64_t(24 * MiB));

  alloc().reset_peak_stats();
  EXPECT_EQ(stat("allocated_bytes.all.peak"), int64_t(12 * MiB));
  EXPECT_EQ(stat("allocation.all.peak"), 1);
  EXPECT_EQ(stat("reserved_bytes.all.peak"), int64_t(24 * MiB));        // a's segment is still cached
  EXPECT_EQ(stat("allocated_bytes.all.allocated"), int64_t(24 * MiB));  // not an accumulated stat

  alloc().reset_accumulated_stats();
  EXPECT_EQ(stat("allocated_bytes.all.allocated"), 0);
  EXPECT_EQ(stat("allocated_bytes.all.freed"), 0);
  EXPECT_EQ(stat("num_device_alloc"), 0);
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(12 * MiB));
  alloc().free(b);
  EXPECT_EQ(stat("allocated_bytes.all.freed"), int64_t(12 * MiB));
}

// Totals of a snapshot's segments, to compare with the stats.
struct Totals {
  int64_t total = 0, allocated = 0, active = 0, requested = 0, segments = 0;
  std::map<std::string, int> states;
};

Totals check_and_sum(const json& segments) {
  Totals totals;
  for (const json& segment : segments) {
    ++totals.segments;
    totals.total += segment.at("total_size").get<int64_t>();
    totals.allocated += segment.at("allocated_size").get<int64_t>();
    totals.active += segment.at("active_size").get<int64_t>();
    totals.requested += segment.at("requested_size").get<int64_t>();
    EXPECT_TRUE(segment.at("segment_type") == "small" || segment.at("segment_type") == "large");
    EXPECT_EQ(segment.at("device"), 0);
    EXPECT_TRUE(segment.contains("stream"));
    EXPECT_TRUE(segment.contains("frames"));
    // Blocks tile the segment from its address, in order.
    auto address = segment.at("address").get<uint64_t>();
    int64_t covered = 0;
    for (const json& block : segment.at("blocks")) {
      EXPECT_EQ(block.at("address").get<uint64_t>(), address);
      address += block.at("size").get<uint64_t>();
      covered += block.at("size").get<int64_t>();
      ++totals.states[block.at("state").get<std::string>()];
    }
    EXPECT_EQ(covered, segment.at("total_size").get<int64_t>());
  }
  return totals;
}

TEST_P(CachingAllocatorTest, SnapshotTotalsEqualTheStats) {
  void* a = alloc().malloc(1000, s0);
  void* b = alloc().malloc(5 * MiB, s1);
  void* c = alloc().malloc(4 * KiB, s0);
  void* d = alloc().malloc(3 * KiB, s0);
  alloc().record_stream(c, s1);
  keep_busy(s1);
  alloc().free(c);  // pending
  alloc().free(a);  // inactive

  const json segments = json::parse(alloc().segments_json().dump());
  const Totals totals = check_and_sum(segments);
  EXPECT_EQ(totals.segments, stat("segment.all.current"));
  EXPECT_EQ(totals.total, stat("reserved_bytes.all.current"));
  EXPECT_EQ(totals.allocated, stat("allocated_bytes.all.current"));
  EXPECT_EQ(totals.active, stat("active_bytes.all.current"));
  EXPECT_EQ(totals.requested, stat("requested_bytes.all.current"));
  EXPECT_EQ(totals.states.at("active_allocated"), 2);     // b, d
  EXPECT_EQ(totals.states.at("active_pending_free"), 1);  // c
  EXPECT_GE(totals.states.at("inactive"), 1);
  finish(s1);
  alloc().free(b);
  alloc().free(d);
}

TEST_P(CachingAllocatorTest, HistoryRecordsEveryActionInOrder) {
  alloc().record_history(true, 1000);
  void* a = alloc().malloc(1000, s0);
  alloc().free(a);
  alloc().empty_cache();
  EXPECT_THROW(alloc().malloc(size_t{1} << 40, s0), OutOfMemoryError);

  const json trace = json::parse(alloc().trace_json().dump());
  std::vector<std::string> actions;
  for (const json& entry : trace) {
    actions.push_back(entry.at("action"));
    EXPECT_TRUE(entry.contains("addr") && entry.contains("size") && entry.contains("stream") &&
                entry.contains("time_us"));
  }
  EXPECT_EQ(actions, (std::vector<std::string>{"segment_alloc", "alloc", "free_requested", "free_completed",
                                               "segment_free", "oom"}));
  EXPECT_EQ(trace[1].at("size"), 1024);
  EXPECT_EQ(trace[0].at("size"), 2 * MiB);
  EXPECT_EQ(trace[1].at("addr"), trace[0].at("addr"));
  EXPECT_LE(trace[0].at("time_us").get<int64_t>(), trace[5].at("time_us").get<int64_t>());
  EXPECT_EQ(trace[5].at("device_free"), 64 * MiB);
}

TEST_P(CachingAllocatorTest, HistoryIsBoundedAndOffByDefault) {
  void* a = alloc().malloc(1000, s0);
  alloc().free(a);
  EXPECT_TRUE(alloc().trace_json().empty());
  alloc().record_history(true, 3);
  for (int i = 0; i < 10; ++i) alloc().free(alloc().malloc(1000, s0));
  const json trace = alloc().trace_json();
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace[2].at("action"), "free_completed");  // the newest entries are kept
  alloc().record_history(false, 3);
  alloc().free(alloc().malloc(1000, s0));
  EXPECT_EQ(alloc().trace_json().size(), 3u);
}

TEST_P(CachingAllocatorTest, SummaryIsAnAlignedTableOfTheStats) {
  void* a = alloc().malloc(5 * MiB, s0);
  const std::string summary = detail::format_memory_summary(alloc().stats().to_map(), 0);
  EXPECT_THAT(summary, ::testing::HasSubstr("ember CUDA memory summary, device ID 0"));
  EXPECT_THAT(summary,
              ::testing::HasSubstr("| Allocated memory      |   5120 KiB |   5120 KiB |   5120 KiB |      0 B   |"));
  EXPECT_THAT(summary,
              ::testing::HasSubstr("| GPU reserved memory   |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |"));
  std::istringstream lines(summary);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(line.size(), 77u) << line;
    ++count;
  }
  EXPECT_EQ(count, 6 + 9 * 4 + 2 * 2 + 1);  // header, 9 metrics x 3 rows, 2 oversize rows, footer
  alloc().free(a);
}

TEST(FormatSize, FollowsPyTorch) {
  EXPECT_EQ(detail::format_size(0), "0 bytes");
  EXPECT_EQ(detail::format_size(1024), "1024 bytes");
  EXPECT_EQ(detail::format_size(1536), "1.50 KiB");
  EXPECT_EQ(detail::format_size(2 * MiB), "2.00 MiB");
  EXPECT_EQ(detail::format_size(size_t{8} << 30), "8.00 GiB");
}

INSTANTIATE_TEST_SUITE_P(Backends, CachingAllocatorTest,
                         ::testing::Values(fake_backend_maker(), emulated_backend_maker()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ember::testing
