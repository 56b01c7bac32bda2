// record_memory_history's stacks: the snapshot's trace entries and active blocks carry
// the C++ frames of the call that allocated or freed them, in PyTorch's frame schema
// ({name, filename, line}, innermost first), over one emulated device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/factories.h"
#include "ember/tensor.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool emulated = (ember::cuda::emulate(1, 256 * MiB), true);

}  // namespace

namespace ember::testing {
namespace {

using nlohmann::json;

[[gnu::noinline]] Tensor history_test_allocate(int64_t elements) {
  Tensor t = ember::empty({elements}, TensorOptions().device(Device(DeviceType::CUDA, 0)));
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return t;
}

[[gnu::noinline]] void history_test_release(Tensor t) {
  t = Tensor();
  asm volatile("" ::: "memory");
}

uint64_t address_of(const Tensor& t) { return reinterpret_cast<uint64_t>(t.data_ptr()); }

// Trace entries of device 0 with `action` at `address`.
std::vector<json> entries(const json& snapshot, const std::string& action, uint64_t address) {
  std::vector<json> found;
  for (const json& entry : snapshot.at("device_traces").at(0))
    if (entry.at("action") == action && entry.at("addr").get<uint64_t>() == address) found.push_back(entry);
  return found;
}

json block_at(const json& snapshot, uint64_t address) {
  for (const json& segment : snapshot.at("segments"))
    for (const json& block : segment.at("blocks"))
      if (block.at("address").get<uint64_t>() == address) return block;
  return nullptr;
}

// Index of the first frame whose function name contains `text`; -1 when none does.
int frame_index(const json& frames, const std::string& text) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].at("name").get<std::string>().find(text) != std::string::npos) return static_cast<int>(i);
  return -1;
}

std::string names(const json& frames) {
  std::string out;
  for (const json& frame : frames) out += "  " + frame.at("name").get<std::string>() + "\n";
  return out;
}

class MemoryHistoryFrames : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(emulated);
    cuda::record_memory_history(true, 1000);
  }
  void TearDown() override { cuda::record_memory_history(false); }
};

TEST_F(MemoryHistoryFrames, AllocationFramesNameTheAllocatingFunctions) {
  Tensor t = history_test_allocate(1000);
  const json snapshot = json::parse(cuda::memory_snapshot_json());
  const auto allocs = entries(snapshot, "alloc", address_of(t));
  ASSERT_EQ(allocs.size(), 1u);
  const json& frames = allocs[0].at("frames");
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frame_index(frames, "malloc"), 0) << names(frames);  // the allocator is innermost
  const int helper = frame_index(frames, "history_test_allocate");
  const int test = frame_index(frames, "TestBody");
  ASSERT_GE(helper, 0) << names(frames);
  ASSERT_GT(test, helper) << names(frames);  // innermost first
  for (const json& frame : frames) {
    EXPECT_EQ(frame.size(), 3u);
    EXPECT_TRUE(frame.at("name").is_string() && frame.at("filename").is_string() && frame.at("line").is_number());
  }
  // With debug information a frame names its function briefly and gives its file and
  // line; without, the symbol table gives the qualified name and no location.
  for (const int index : {helper, test}) {
    const json& frame = frames[index];
    if (frame.at("filename").get<std::string>().empty()) {
      EXPECT_EQ(frame.at("line"), 0);
      if (index == test) {
        EXPECT_THAT(
            frame.at("name").get<std::string>(),
            ::testing::HasSubstr("MemoryHistoryFrames_AllocationFramesNameTheAllocatingFunctions_Test::TestBody"));
      }
    } else {
      EXPECT_THAT(frame.at("filename").get<std::string>(), ::testing::EndsWith("test_memory_history_frames.cpp"));
      EXPECT_GT(frame.at("line").get<int>(), 0);
    }
  }
  // The live block carries the same stack.
  const json block = block_at(snapshot, address_of(t));
  ASSERT_FALSE(block.is_null());
  EXPECT_EQ(block.at("state"), "active_allocated");
  EXPECT_EQ(block.at("frames"), frames);
}

TEST_F(MemoryHistoryFrames, FreeFramesNameTheFreeingFunction) {
  Tensor t = history_test_allocate(5000);
  const uint64_t address = address_of(t);
  history_test_release(std::move(t));
  const json snapshot = json::parse(cuda::memory_snapshot_json());
  for (const char* action : {"free_requested", "free_completed"}) {
    const auto found = entries(snapshot, action, address);
    ASSERT_FALSE(found.empty()) << action;
    const json& frames = found.back().at("frames");
    EXPECT_GE(frame_index(frames, "history_test_release"), 0) << action << "\n" << names(frames);
    EXPECT_EQ(frame_index(frames, "history_test_allocate"), -1) << action << "\n" << names(frames);
  }
  // A cached block has no stack.
  const json block = block_at(snapshot, address);
  ASSERT_FALSE(block.is_null());
  EXPECT_EQ(block.at("state"), "inactive");
  EXPECT_TRUE(block.at("frames").empty());
}

TEST_F(MemoryHistoryFrames, NothingIsRecordedWithHistoryOff) {
  cuda::record_memory_history(false);
  const size_t recorded = json::parse(cuda::memory_snapshot_json()).at("device_traces").at(0).size();
  Tensor t = history_test_allocate(3000);
  const json snapshot = json::parse(cuda::memory_snapshot_json());
  EXPECT_EQ(snapshot.at("device_traces").at(0).size(), recorded);  // what was recorded is kept, nothing added
  const json block = block_at(snapshot, address_of(t));
  ASSERT_FALSE(block.is_null());
  EXPECT_EQ(block.at("state"), "active_allocated");
  EXPECT_TRUE(block.at("frames").empty());
}

}  // namespace
}  // namespace ember::testing
