// One device's allocated-memory timeline; see Note [Timeline downsampling] in view.h.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "view.h"

namespace ember::memviz {
namespace {

struct Allocation {
  int64_t first = 0;  // positions alive, inclusive
  int64_t last = 0;
  uint64_t size = 0;
  uint64_t address = 0;
  uint64_t stream = 0;
  int stack = -1;
  int64_t time_us = 0;  // of its "alloc"; 0 when made before the trace
};

struct Replay {
  std::vector<Allocation> allocations;
  std::vector<int64_t> times;  // time_us of position p's event (position 0: the first event's)
  int64_t positions = 1;
};

Replay replay(const Snapshot& snapshot, int device) {
  Replay result;
  static const std::vector<TraceEntry> kNoTrace;
  const auto& trace =
      device < static_cast<int>(snapshot.device_traces.size()) ? snapshot.device_traces[device] : kNoTrace;
  std::unordered_map<uint64_t, size_t> open;  // address -> allocation alive there
  int64_t events = 0;
  for (const TraceEntry& entry : trace) {
    if (entry.action == Action::kAlloc) {
      // An address allocated again without a free in between (a trace that dropped
      // entries): the earlier allocation ends here.
      if (auto it = open.find(entry.address); it != open.end()) result.allocations[it->second].last = events;
      open[entry.address] = result.allocations.size();
      result.allocations.push_back(
          {events + 1, -1, entry.size, entry.address, entry.stream, entry.stack, entry.time_us});
    } else if (entry.action == Action::kFreeCompleted) {
      if (auto it = open.find(entry.address); it != open.end()) {
        result.allocations[it->second].last = events;
        open.erase(it);
      } else {
        result.allocations.push_back({0, events, entry.size, entry.address, entry.stream, entry.stack, 0});
      }
    } else {
      continue;
    }
    if (result.times.empty()) result.times.push_back(entry.time_us);
    result.times.push_back(entry.time_us);
    ++events;
  }
  result.positions = events + 1;
  if (result.times.empty()) result.times.push_back(0);
  for (auto& [address, index] : open) result.allocations[index].last = events;
  // Blocks active at the snapshot that the trace never allocated: alive throughout.
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const Block& block : segment.blocks) {
      if (block.state == BlockState::kInactive || open.count(block.address)) continue;
      result.allocations.push_back({0, events, block.size, block.address, segment.stream, block.stack, 0});
    }
  }
  return result;
}

}  // namespace

nlohmann::json timeline_json(const Snapshot& snapshot, int device, const ViewOptions& options) {
  const Replay run = replay(snapshot, device);
  const int64_t positions = run.positions;

  // Total allocated at every position, from a difference array.
  std::vector<int64_t> total(static_cast<size_t>(positions) + 1, 0);
  for (const Allocation& a : run.allocations) {
    total[a.first] += static_cast<int64_t>(a.size);
    total[a.last + 1] -= static_cast<int64_t>(a.size);
  }
  std::partial_sum(total.begin(), total.end(), total.begin());
  total.pop_back();

  // Each bucket is represented by its peak position.
  const int64_t buckets = std::min<int64_t>(positions, static_cast<int64_t>(std::max<size_t>(options.samples, 1)));
  std::vector<int64_t> samples;
  samples.reserve(buckets);
  for (int64_t k = 0; k < buckets; ++k) {
    const int64_t begin = k * positions / buckets, end = (k + 1) * positions / buckets;
    samples.push_back(std::max_element(total.begin() + begin, total.begin() + end) - total.begin());
  }

  // The allocations covering the most drawn area (bytes x samples alive), in allocation
  // order: a big long-lived buffer outranks a bigger one alive at a single sample.
  std::vector<std::pair<double, size_t>> visible;  // area, index
  for (size_t i = 0; i < run.allocations.size(); ++i) {
    const Allocation& a = run.allocations[i];
    const auto first = std::lower_bound(samples.begin(), samples.end(), a.first);
    const auto end = std::upper_bound(first, samples.end(), a.last);
    if (end > first) visible.emplace_back(static_cast<double>(a.size) * static_cast<double>(end - first), i);
  }
  const size_t shown = std::min(visible.size(), options.bands);
  std::partial_sort(
      visible.begin(), visible.begin() + static_cast<std::ptrdiff_t>(shown), visible.end(),
      [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
  visible.resize(shown);
  std::vector<size_t> drawn;
  for (const auto& [area, index] : visible) drawn.push_back(index);
  std::sort(drawn.begin(), drawn.end(), [&](size_t x, size_t y) {
    const Allocation &a = run.allocations[x], &b = run.allocations[y];
    return a.first != b.first ? a.first < b.first : x < y;
  });

  nlohmann::json bands = nlohmann::json::array();
  for (size_t index : drawn) {
    const Allocation& a = run.allocations[index];
    bands.push_back({a.first, a.last, a.size, hex_address(a.address), a.stream, a.stack, a.time_us});
  }
  nlohmann::json totals = nlohmann::json::array(), times = nlohmann::json::array();
  for (int64_t p : samples) {
    totals.push_back(total[p]);
    times.push_back(run.times[p]);
  }
  return {{"positions", positions},
          {"allocations", run.allocations.size()},
          {"peak", total.empty() ? 0 : *std::max_element(total.begin(), total.end())},
          {"samples", std::move(samples)},
          {"totals", std::move(totals)},
          {"times", std::move(times)},
          {"bands", std::move(bands)}};
}

}  // namespace ember::memviz
