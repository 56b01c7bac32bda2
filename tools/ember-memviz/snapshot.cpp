#include "snapshot.h"

#include <algorithm>
#include <istream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ember::memviz {
namespace {

using nlohmann::json;

[[noreturn]] void malformed(const std::string& what) { throw std::runtime_error("not a memory snapshot: " + what); }

uint64_t unsigned_field(const json& object, const char* key, const char* where) {
  auto it = object.find(key);
  if (it == object.end()) malformed(std::string(where) + " has no \"" + key + "\"");
  if (!it->is_number()) malformed(std::string(where) + " \"" + key + "\" is not a number");
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
}

uint64_t optional_unsigned(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return 0;
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
}

Action action_of(const std::string& name) {
  if (name == "alloc") return Action::kAlloc;
  if (name == "free_requested") return Action::kFreeRequested;
  if (name == "free_completed" || name == "free") return Action::kFreeCompleted;
  if (name == "segment_alloc" || name == "segment_map") return Action::kSegmentAlloc;
  if (name == "segment_free" || name == "segment_unmap") return Action::kSegmentFree;
  if (name == "oom") return Action::kOom;
  return Action::kOther;
}

// Interns frames and stacks; most trace entries share a handful of stacks.
class Interner {
 public:
  explicit Interner(Snapshot& snapshot) : snapshot_(snapshot) {}

  int stack(const json* frames) {
    if (frames == nullptr || !frames->is_array() || frames->empty()) return -1;
    std::vector<int> ids;
    ids.reserve(frames->size());
    for (const json& frame : *frames) ids.push_back(this->frame(frame));
    auto [it, inserted] = stack_ids_.try_emplace(ids, static_cast<int>(snapshot_.stacks.size()));
    if (inserted) snapshot_.stacks.push_back(std::move(ids));
    return it->second;
  }

 private:
  int frame(const json& frame) {
    if (!frame.is_object()) malformed("a frame is not an object");
    Frame f;
    if (auto it = frame.find("name"); it != frame.end() && it->is_string()) f.name = it->get<std::string>();
    if (auto it = frame.find("filename"); it != frame.end() && it->is_string()) f.filename = it->get<std::string>();
    if (auto it = frame.find("line"); it != frame.end() && it->is_number_integer()) f.line = it->get<int64_t>();
    auto [it, inserted] = frame_ids_.try_emplace(f, static_cast<int>(snapshot_.frames.size()));
    if (inserted) snapshot_.frames.push_back(std::move(f));
    return it->second;
  }

  Snapshot& snapshot_;
  std::map<Frame, int> frame_ids_;
  std::map<std::vector<int>, int> stack_ids_;
};

const json* frames_of_block(const json& block) {
  if (auto it = block.find("frames"); it != block.end() && !it->empty()) return &*it;
  // PyTorch before 2.1: {"history": [{"addr", "real_size", "frames"}, ...]}, newest last.
  if (auto it = block.find("history"); it != block.end() && it->is_array() && !it->empty()) {
    const json& last = it->back();
    if (auto frames = last.find("frames"); frames != last.end()) return &*frames;
  }
  return nullptr;
}

BlockState state_of(const json& block) {
  const std::string state = block.value("state", "inactive");
  if (state == "active_allocated") return BlockState::kAllocated;
  if (state == "active_pending_free") return BlockState::kPendingFree;
  if (state == "inactive") return BlockState::kInactive;
  malformed("unknown block state \"" + state + "\"");
}

Segment read_segment(const json& object, Interner& interner) {
  if (!object.is_object()) malformed("a segment is not an object");
  Segment segment;
  segment.device = static_cast<int>(optional_unsigned(object, "device"));
  segment.address = unsigned_field(object, "address", "a segment");
  segment.total_size = unsigned_field(object, "total_size", "a segment");
  segment.allocated_size = optional_unsigned(object, "allocated_size");
  segment.stream = optional_unsigned(object, "stream");
  segment.segment_type = object.value("segment_type", "");
  auto blocks = object.find("blocks");
  if (blocks == object.end() || !blocks->is_array()) malformed("a segment has no \"blocks\" list");
  uint64_t next_address = segment.address;  // blocks tile the segment in order
  for (const json& item : *blocks) {
    Block block;
    block.size = unsigned_field(item, "size", "a block");
    block.address = item.contains("address") ? unsigned_field(item, "address", "a block") : next_address;
    block.requested_size = optional_unsigned(item, "requested_size");
    block.state = state_of(item);
    block.stack = interner.stack(frames_of_block(item));
    next_address = block.address + block.size;
    segment.blocks.push_back(block);
  }
  return segment;
}

TraceEntry read_trace_entry(const json& item, Interner& interner) {
  if (!item.is_object()) malformed("a trace entry is not an object");
  TraceEntry entry;
  auto action = item.find("action");
  if (action == item.end() || !action->is_string()) malformed("a trace entry has no \"action\"");
  entry.action = action_of(action->get<std::string>());
  entry.address = optional_unsigned(item, "addr");
  entry.size = optional_unsigned(item, "size");
  entry.stream = optional_unsigned(item, "stream");
  entry.time_us = static_cast<int64_t>(optional_unsigned(item, "time_us"));
  auto frames = item.find("frames");
  entry.stack = interner.stack(frames == item.end() ? nullptr : &*frames);
  return entry;
}

}  // namespace

int Snapshot::device_count() const {
  int count = static_cast<int>(device_traces.size());
  for (const Segment& segment : segments) count = std::max(count, segment.device + 1);
  return count;
}

Snapshot read_snapshot(std::istream& in) {
  Snapshot snapshot;
  Interner interner(snapshot);
  // Trace entries are converted as the parser finishes each one and then dropped, so a
  // trace of millions of entries never exists as a JSON tree (depths: 1 the top-level
  // keys, 2 one device's trace, 3 an entry).
  bool in_traces = false;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) in_traces = parsed == "device_traces";
    if (!in_traces) return true;
    if (depth == 1 && event == json::parse_event_t::array_end) in_traces = false;
    if (depth == 2 && event == json::parse_event_t::array_start) snapshot.device_traces.emplace_back();
    if (depth == 2 && (event == json::parse_event_t::object_end || event == json::parse_event_t::value))
      malformed("a device trace is not a list");
    if (depth == 3 && (event == json::parse_event_t::object_end || event == json::parse_event_t::value ||
                       event == json::parse_event_t::array_end)) {
      snapshot.device_traces.back().push_back(read_trace_entry(parsed, interner));
      return false;
    }
    return true;
  };
  json top;
  try {
    top = json::parse(in, on_event);
  } catch (const json::parse_error& error) {
    malformed(error.what());
  }
  if (!top.is_object()) malformed("the top level is not an object");
  auto segments = top.find("segments");
  if (segments == top.end() || !segments->is_array()) malformed("no \"segments\" list");
  for (const auto& segment : *segments) snapshot.segments.push_back(read_segment(segment, interner));
  if (auto traces = top.find("device_traces"); traces != top.end() && !traces->is_array())
    malformed("\"device_traces\" is not a list");
  return snapshot;
}

}  // namespace ember::memviz
