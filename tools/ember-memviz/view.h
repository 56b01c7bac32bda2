// What the page draws, computed from a snapshot: the page gets a few thousand numbers per
// device however long the trace, so it stays small and draws in milliseconds.
//
// Note [Timeline downsampling]
// Positions 0..T count the trace's allocation events ("alloc", "free_completed"):
// position p is the state after p of them. An allocation is alive over a closed range of
// positions; one freed (or still allocated) without its "alloc" in the trace was made
// before the trace began and is alive from position 0. The positions are cut into at
// most `samples` equal buckets and each bucket is represented by its position of highest
// total: the drawn envelope keeps every peak exactly, and the stack drawn at a sample is
// the true composition of memory at that position. Of the allocations alive at some
// sample, the `bands` largest are drawn one by one, stacked in allocation order; the
// others are summed into one band on top.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "snapshot.h"

namespace ember::memviz {

struct ViewOptions {
  size_t samples = 2048;   // timeline points per device
  size_t bands = 2000;     // allocations drawn individually per device
  size_t sites = 20;       // rows of the allocation-site table per device
  size_t segments = 1400;  // segments drawn per device (the largest; a canvas is at most 32k pixels tall)
};

/// The page's data: {"frames", "stacks", "devices": [{"device", "timeline", "segments",
/// "sites", ...}]}.
nlohmann::json build_view(const Snapshot& snapshot, const ViewOptions& options);

/// One device's timeline (see Note [Timeline downsampling]).
nlohmann::json timeline_json(const Snapshot& snapshot, int device, const ViewOptions& options);

/// For each stack, the frame that is the allocation site: the innermost frame that is
/// not inside ember, PyTorch or the C++ library; -1 when the stack has none.
std::vector<int> allocation_sites(const Snapshot& snapshot);

/// "0x7f3a5c000000".
std::string hex_address(uint64_t address);

}  // namespace ember::memviz
