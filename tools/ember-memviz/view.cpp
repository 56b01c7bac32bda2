// The page's data: frames and stacks, and per device the timeline, the segments with
// their blocks, and the top allocation sites.
#include "view.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace ember::memviz {
namespace {

using nlohmann::json;

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// ember's source root as its own frames name it: the innermost frame of every stack ember
// records is its caching allocator (src/memory/caching_allocator*.cpp), so the root is
// the path before "/src/memory/" there. Frames are symbolised on the machine that built
// the library, so the root is whatever path that build used.
std::string ember_root(const Snapshot& snapshot) {
  for (const Frame& frame : snapshot.frames) {
    const auto at = frame.filename.rfind("/src/memory/caching_allocator");
    if (at != std::string::npos) return frame.filename.substr(0, at);
  }
  return {};
}

// Frames that are machinery rather than the code that asked for memory.
bool is_internal(const Frame& frame, const std::string& root) {
  if (frame.name.empty() && frame.filename.empty()) return true;
  if (!root.empty() &&
      (starts_with(frame.filename, root + "/src/") || starts_with(frame.filename, root + "/include/ember/")))
    return true;
  // Without debug information only names are known: ember's own functions are in
  // namespace ember (templates' names start with their return type).
  if (frame.filename.empty() &&
      (starts_with(frame.name, "ember::") || frame.name.find(" ember::") != std::string::npos))
    return true;
  for (std::string_view prefix : {"std::", "__", "c10::", "at::", "torch::", "unwind::", "CapturedTraceback"})
    if (starts_with(frame.name, prefix)) return true;
  for (std::string_view part : {"/torch/", "/c10/", "/include/c++/", "libc_start"})
    if (frame.filename.find(part) != std::string::npos || frame.name.find(part) != std::string::npos) return true;
  return false;
}

const char* state_name(BlockState state) {
  switch (state) {
    case BlockState::kAllocated: return "allocated";
    case BlockState::kPendingFree: return "pending_free";
    case BlockState::kInactive: return "inactive";
  }
  return "inactive";
}

json segments_json(const Snapshot& snapshot, int device, const ViewOptions& options, size_t& total_count) {
  std::vector<const Segment*> segments;
  for (const Segment& segment : snapshot.segments)
    if (segment.device == device) segments.push_back(&segment);
  total_count = segments.size();
  if (segments.size() > options.segments) {  // keep the largest, still shown by address
    std::partial_sort(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(options.segments),
                      segments.end(), [](auto* a, auto* b) { return a->total_size > b->total_size; });
    segments.resize(options.segments);
  }
  std::sort(segments.begin(), segments.end(), [](auto* a, auto* b) { return a->address < b->address; });
  json out = json::array();
  for (const Segment* segment : segments) {
    json blocks = json::array();
    for (const Block& block : segment->blocks)
      blocks.push_back(
          {hex_address(block.address), block.size, block.requested_size, state_name(block.state), block.stack});
    out.push_back({{"address", hex_address(segment->address)},
                   {"total_size", segment->total_size},
                   {"allocated_size", segment->allocated_size},
                   {"stream", segment->stream},
                   {"segment_type", segment->segment_type},
                   {"blocks", std::move(blocks)}});
  }
  return out;
}

// Bytes and counts per site: every "alloc" of the trace, or without a trace the blocks
// allocated at the snapshot.
json sites_json(const Snapshot& snapshot, int device, const std::vector<int>& site_of_stack, const ViewOptions& options,
                std::string& basis) {
  struct Tally {
    uint64_t bytes = 0, count = 0;
    int stack = -1;  // one stack through the site, for the page's details
  };
  std::map<int, Tally> tallies;  // site frame (-1: no stack) -> tally
  auto add = [&](int stack, uint64_t size) {
    const int site = stack < 0 ? -1 : site_of_stack[stack];
    Tally& tally = tallies[site];
    tally.bytes += size;
    ++tally.count;
    if (tally.stack < 0) tally.stack = stack;
  };
  const bool has_trace = device < static_cast<int>(snapshot.device_traces.size()) &&
                         std::any_of(snapshot.device_traces[device].begin(), snapshot.device_traces[device].end(),
                                     [](const TraceEntry& e) { return e.action == Action::kAlloc; });
  if (has_trace) {
    basis = "bytes allocated over the trace";
    for (const TraceEntry& entry : snapshot.device_traces[device])
      if (entry.action == Action::kAlloc) add(entry.stack, entry.size);
  } else {
    basis = "bytes allocated at the snapshot";
    for (const Segment& segment : snapshot.segments)
      if (segment.device == device)
        for (const Block& block : segment.blocks)
          if (block.state == BlockState::kAllocated) add(block.stack, block.size);
  }
  std::vector<std::pair<int, Tally>> rows(tallies.begin(), tallies.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes : a.first < b.first;
  });
  if (rows.size() > options.sites) rows.resize(options.sites);
  json out = json::array();
  for (const auto& [site, tally] : rows) out.push_back({site, tally.bytes, tally.count, tally.stack});
  return out;
}

}  // namespace

std::string hex_address(uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

std::vector<int> allocation_sites(const Snapshot& snapshot) {
  const std::string root = ember_root(snapshot);
  std::vector<char> internal(snapshot.frames.size());
  for (size_t i = 0; i < snapshot.frames.size(); ++i) internal[i] = is_internal(snapshot.frames[i], root);
  std::vector<int> sites;
  sites.reserve(snapshot.stacks.size());
  for (const auto& stack : snapshot.stacks) {
    auto it = std::find_if(stack.begin(), stack.end(), [&](int frame) { return !internal[frame]; });
    sites.push_back(it == stack.end() ? -1 : *it);
  }
  return sites;
}

json build_view(const Snapshot& snapshot, const ViewOptions& options) {
  const std::vector<int> site_of_stack = allocation_sites(snapshot);
  const std::string root = ember_root(snapshot);
  json frames = json::array();
  for (const Frame& frame : snapshot.frames)
    frames.push_back({frame.name, frame.filename, frame.line, is_internal(frame, root) ? 1 : 0});
  json devices = json::array();
  for (int device = 0; device < snapshot.device_count(); ++device) {
    size_t segment_count = 0;
    std::string basis;
    json segments = segments_json(snapshot, device, options, segment_count);
    json sites = sites_json(snapshot, device, site_of_stack, options, basis);
    const size_t events =
        device < static_cast<int>(snapshot.device_traces.size()) ? snapshot.device_traces[device].size() : 0;
    if (segment_count == 0 && events == 0) continue;  // a device the program never used
    devices.push_back({{"device", device},
                       {"segment_count", segment_count},
                       {"trace_entries", events},
                       {"segments", std::move(segments)},
                       {"sites", std::move(sites)},
                       {"sites_basis", basis},
                       {"timeline", timeline_json(snapshot, device, options)}});
  }
  return {{"frames", std::move(frames)}, {"stacks", snapshot.stacks}, {"devices", std::move(devices)}};
}

}  // namespace ember::memviz
