// ember-memviz's reader, view and page: on a snapshot this process records over an
// emulated device, on PyTorch-shaped snapshots, on a long synthetic trace, and on bad
// input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/factories.h"
#include "ember/tensor.h"
#include "page.h"
#include "snapshot.h"
#include "view.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool emulated = (ember::cuda::emulate(1, 256 * MiB), true);

}  // namespace

namespace memviz_test {

using ember::memviz::Snapshot;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Snapshot parse(const std::string& text) {
  std::istringstream in(text);
  return ember::memviz::read_snapshot(in);
}

std::string site_name(const json& view, const json& site_row) {
  const int frame = site_row.at(0).get<int>();
  return frame < 0 ? "(none)" : view.at("frames").at(frame).at(0).get<std::string>();
}

[[gnu::noinline]] std::vector<ember::Tensor> memviz_test_big_allocations() {
  std::vector<ember::Tensor> kept;
  for (int i = 0; i < 3; ++i) kept.push_back(ember::empty({int64_t{3} << 20}, ember::TensorOptions().device("cuda:0")));
  asm volatile("" ::: "memory");
  return kept;
}

[[gnu::noinline]] void memviz_test_small_allocations() {
  for (int i = 0; i < 10; ++i) ember::Tensor t = ember::empty({1000}, ember::TensorOptions().device("cuda:0"));
  asm volatile("" ::: "memory");
}

TEST(EmberMemviz, ViewOfARecordedSnapshot) {
  ASSERT_TRUE(emulated);
  ember::cuda::record_memory_history(true);
  std::vector<ember::Tensor> big = memviz_test_big_allocations();  // 3 x 12 MiB, kept
  memviz_test_small_allocations();                                 // 10 x 4000 B, freed
  const std::string text = ember::cuda::memory_snapshot_json();
  ember::cuda::record_memory_history(false);
  const json raw = json::parse(text);

  const Snapshot snapshot = parse(text);
  EXPECT_EQ(snapshot.segments.size(), raw.at("segments").size());
  ASSERT_EQ(snapshot.device_traces.size(), 1u);
  EXPECT_EQ(snapshot.device_traces[0].size(), raw.at("device_traces").at(0).size());

  const json view = ember::memviz::build_view(snapshot, {});
  ASSERT_EQ(view.at("devices").size(), 1u);
  const json& device = view.at("devices").at(0);
  EXPECT_EQ(device.at("segment_count"), raw.at("segments").size());
  // The site is the test's function, not ember's allocator, factory or the C++ library.
  const json& sites = device.at("sites");
  ASSERT_GE(sites.size(), 2u);
  EXPECT_THAT(site_name(view, sites[0]), HasSubstr("memviz_test_big_allocations"));
  EXPECT_EQ(sites[0].at(1), 3 * 12 * MiB);
  EXPECT_EQ(sites[0].at(2), 3);
  EXPECT_THAT(site_name(view, sites[1]), HasSubstr("memviz_test_small_allocations"));
  EXPECT_EQ(sites[1].at(1), 10 * 4096u);  // 4000 B round up to 4096
  // The timeline's peak is the most ever allocated (nothing else ran on this device).
  const json& timeline = device.at("timeline");
  EXPECT_EQ(timeline.at("peak"), ember::cuda::max_memory_allocated(0));
  EXPECT_EQ(timeline.at("allocations"), 13);
  EXPECT_EQ(timeline.at("positions"), 1 + 13 + 10);  // 13 allocs, 10 completed frees
}

// PyTorch 2.x _snapshot() shape: block addresses, python and C++ frames, "free" from
// older traces; and the PyTorch 1.13 block shape ("history" instead of "frames").
constexpr const char* kTorchSnapshot = R"({
  "segments": [
    {"device": 0, "address": 139637637922816, "total_size": 2097152, "allocated_size": 1024,
     "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
     "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
     "blocks": [
       {"address": 139637637922816, "size": 1024, "requested_size": 1000, "state": "active_allocated",
        "frames": [{"name": "malloc", "filename": "/pytorch/c10/cuda/CUDACachingAllocator.cpp", "line": 1200},
                   {"name": "forward", "filename": "/home/me/model.py", "line": 42},
                   {"name": "<module>", "filename": "/home/me/train.py", "line": 7}]},
       {"address": 139637637923840, "size": 2096128, "requested_size": 0, "state": "inactive", "frames": []}]},
    {"device": 1, "address": 4096, "total_size": 20971520, "allocated_size": 20971520, "stream": 7,
     "segment_type": "large",
     "blocks": [{"size": 10485760, "state": "active_allocated",
                 "history": [{"addr": 4096, "real_size": 10485760,
                              "frames": [{"name": "step", "filename": "/home/me/optim.py", "line": 3}]}]},
                {"size": 10485760, "state": "active_pending_free", "frames": []}]}
  ],
  "device_traces": [
    [{"action": "alloc", "addr": 139637637922816, "size": 1024, "stream": 0, "time_us": 5,
      "frames": [{"name": "forward", "filename": "/home/me/model.py", "line": 42}]},
     {"action": "free", "addr": 1, "size": 512, "stream": 0, "time_us": 6, "frames": []}],
    []
  ]
})";

TEST(EmberMemviz, ReadsPyTorchSnapshots) {
  const Snapshot snapshot = parse(kTorchSnapshot);
  ASSERT_EQ(snapshot.segments.size(), 2u);
  const auto& second = snapshot.segments[1];
  EXPECT_EQ(second.device, 1);
  ASSERT_EQ(second.blocks.size(), 2u);
  EXPECT_EQ(second.blocks[1].address, 4096u + 10485760u);  // follows from the segment's
  EXPECT_EQ(second.blocks[1].state, ember::memviz::BlockState::kPendingFree);
  ASSERT_GE(second.blocks[0].stack, 0);  // from "history"
  EXPECT_EQ(snapshot.frames[snapshot.stacks[second.blocks[0].stack][0]].name, "step");
  ASSERT_EQ(snapshot.device_traces[0].size(), 2u);
  EXPECT_EQ(snapshot.device_traces[0][1].action, ember::memviz::Action::kFreeCompleted);

  const json view = ember::memviz::build_view(snapshot, {});
  ASSERT_EQ(view.at("devices").size(), 2u);
  EXPECT_EQ(site_name(view, view.at("devices").at(0).at("sites").at(0)), "forward");  // PyTorch's frame skipped
  EXPECT_EQ(site_name(view, view.at("devices").at(1).at("sites").at(0)), "step");     // no trace: the blocks
  EXPECT_EQ(view.at("devices").at(1).at("sites_basis"), "bytes allocated at the snapshot");
  // The free of 512 B at an address never allocated in the trace was allocated before it.
  const json& timeline = view.at("devices").at(0).at("timeline");
  EXPECT_EQ(timeline.at("totals").at(0), 512);
  EXPECT_EQ(timeline.at("peak"), 512 + 1024);
}

TEST(EmberMemviz, LongTracesAreDownsampledKeepingThePeaks) {
  // 50,000 allocations, each freed at the next event, one of them a spike of 1 GiB. The
  // snapshot's text is written directly (building it as json objects took most of the
  // test's time in the sanitizer builds).
  std::string text = R"({"segments": [], "device_traces": [[)";
  for (int i = 0; i < 50000; ++i) {
    const uint64_t size = i == 12345 ? (uint64_t{1} << 30) : 512u * (1 + i % 97);
    const std::string fields = R"(, "addr": )" + std::to_string(4096u * (i + 1)) + R"(, "size": )" +
                               std::to_string(size) + R"(, "stream": 0})";
    text += (i ? "," : "") + std::string(R"({"action": "alloc")") + fields + R"(,{"action": "free_completed")" + fields;
  }
  text += "]]}";
  const Snapshot snapshot = parse(text);
  ember::memviz::ViewOptions options;
  options.samples = 1000;
  options.bands = 50;
  const json timeline = ember::memviz::timeline_json(snapshot, 0, options);
  EXPECT_EQ(timeline.at("positions"), 100001);
  EXPECT_EQ(timeline.at("samples").size(), 1000u);
  EXPECT_EQ(timeline.at("peak"), uint64_t{1} << 30);
  const auto& totals = timeline.at("totals");
  EXPECT_EQ(*std::max_element(totals.begin(), totals.end()), uint64_t{1} << 30);  // the spike survives
  ASSERT_EQ(timeline.at("bands").size(), 50u);
  // The largest band is the spike, alive exactly at its one position.
  const auto spike = std::find_if(timeline.at("bands").begin(), timeline.at("bands").end(),
                                  [](const json& band) { return band.at(2) == uint64_t{1} << 30; });
  ASSERT_NE(spike, timeline.at("bands").end());
  EXPECT_EQ(spike->at(0), 2 * 12345 + 1);
  EXPECT_EQ(spike->at(1), 2 * 12345 + 1);
}

TEST(EmberMemviz, PageIsSelfContainedAndEscapesItsData) {
  json snapshot_json = json::parse(kTorchSnapshot);
  snapshot_json["segments"][0]["blocks"][0]["frames"][1]["name"] = "</script><script>alert(1)</script>";
  const Snapshot snapshot = parse(snapshot_json.dump());
  json view = ember::memviz::build_view(snapshot, {});
  view["source"] = "snap.json";
  const std::string page = ember::memviz::render_page(view);
  EXPECT_THAT(page, StartsWith("<!DOCTYPE html>"));
  EXPECT_EQ(page.find("alert(1)</script>"), std::string::npos);
  EXPECT_THAT(page, HasSubstr("\\u003c/script>\\u003cscript>alert(1)"));
  for (const char* remote : {"http://", "https://", "src=", "@import", "url("})
    EXPECT_EQ(page.find(remote), std::string::npos) << remote;
  // The data reads back as the view.
  const size_t begin = page.find("<script id=\"snapshot-data\" type=\"application/json\">");
  ASSERT_NE(begin, std::string::npos);
  const size_t start = page.find('>', begin) + 1;
  const size_t end = page.find("</script>", start);
  EXPECT_EQ(json::parse(page.substr(start, end - start)), view);
}

TEST(EmberMemviz, BadSnapshotsAreReported) {
  auto message = [](const std::string& text) {
    try {
      parse(text);
    } catch (const std::runtime_error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"device_traces": []})"), "not a memory snapshot: no \"segments\" list");
  EXPECT_EQ(message(R"([1, 2])"), "not a memory snapshot: the top level is not an object");
  EXPECT_EQ(message(R"({"segments": [{"address": 1, "blocks": []}]})"),
            "not a memory snapshot: a segment has no \"total_size\"");
  EXPECT_EQ(message(R"({"segments": [], "device_traces": [[{"addr": 1}]]})"),
            "not a memory snapshot: a trace entry has no \"action\"");
  EXPECT_EQ(message(R"({"segments": [], "device_traces": [5]})"),
            "not a memory snapshot: a device trace is not a list");
  EXPECT_THAT(message("{\"segments\": [}"), StartsWith("not a memory snapshot: [json.exception.parse_error"));
}

}  // namespace memviz_test
