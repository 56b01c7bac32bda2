// The parts of a memory snapshot that ember-memviz draws, read from ember's
// memory_snapshot_json() or from PyTorch's torch.cuda.memory._snapshot() written as JSON.
//
// Both use one schema (torch/cuda/_memory_viz.py reads it): "segments", each with its
// "blocks", and "device_traces", one list of trace entries per device. Frames are
// {name, filename, line}, innermost first. Older PyTorch writes a block's frames under
// "history"[0] and no block addresses (they follow from the segment's); both are read.
// Stacks and frames are interned: a snapshot with a million trace entries has few
// distinct stacks.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace ember::memviz {

struct Frame {
  std::string name;
  std::string filename;
  int64_t line = 0;
  bool operator<(const Frame& other) const {
    return std::tie(name, filename, line) < std::tie(other.name, other.filename, other.line);
  }
};

enum class BlockState { kAllocated, kPendingFree, kInactive };

struct Block {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;
  BlockState state = BlockState::kInactive;
  int stack = -1;  // index into Snapshot::stacks; -1: none recorded
};

struct Segment {
  int device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t stream = 0;
  std::string segment_type;
  std::vector<Block> blocks;
};

/// Trace actions. PyTorch's "free" (before 2.1) ends an allocation as "free_completed"
/// does; "segment_map"/"segment_unmap" (expandable segments) count as segment_alloc/free.
enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kOom, kOther };

struct TraceEntry {
  Action action = Action::kOther;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  int64_t time_us = 0;
  int stack = -1;
};

struct Snapshot {
  std::vector<Segment> segments;
  std::vector<std::vector<TraceEntry>> device_traces;  // index = device
  std::vector<Frame> frames;
  std::vector<std::vector<int>> stacks;  // frame indices, innermost first

  /// Number of devices with segments or traces.
  int device_count() const;
};

/// Parses a whole snapshot from `in`. Throws std::runtime_error naming what is missing
/// or malformed.
Snapshot read_snapshot(std::istream& in);

}  // namespace ember::memviz
