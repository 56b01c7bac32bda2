// CachingAllocator: the allocation history and PyTorch-schema snapshots.
//
// Schema (torch.cuda.memory._snapshot(), read by torch/cuda/_memory_viz.py): a segment
// is {device, address, total_size, allocated_size, active_size, requested_size, stream,
// segment_type, segment_pool_id, is_expandable, frames, blocks}; a block is {address,
// size, requested_size, state, frames} with state active_allocated, active_pending_free
// or inactive; a trace entry is {action, addr, size, stream, time_us, frames}.
#include <algorithm>
#include <chrono>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "memory/caching_allocator.h"

namespace ember::detail {

void CachingAllocator::record_history(bool enabled, size_t max_entries) {
  std::lock_guard lock(mutex_);
  recording_ = enabled && max_entries > 0;
  if (!enabled) return;  // keep what was recorded, so it can still be snapshotted
  trace_capacity_ = max_entries;
  while (trace_.size() > trace_capacity_) trace_.pop_front();
}

void CachingAllocator::record_trace(const char* action, uintptr_t address, size_t size, uint64_t stream_id) {
  // Bounded: the oldest entries go first, as in PyTorch's ring buffer.
  if (trace_.size() >= trace_capacity_) trace_.pop_front();
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  trace_.push_back({action, address, size, stream_id, static_cast<int64_t>(now.count())});
}

std::vector<CachingAllocator::Block*> CachingAllocator::segment_heads() const {
  // Every segment's first block is cached, allocated, or waiting for its events.
  std::vector<Block*> heads;
  auto consider = [&](Block* block) {
    if (block->prev == nullptr) heads.push_back(block);
  };
  for (const BlockPool* pool : {&small_pool_, &large_pool_})
    for (const PoolEntry& entry : pool->blocks) consider(entry.block);
  allocated_.for_each(consider);
  std::unordered_set<Block*> pending;
  for (const auto& [stream, queue] : pending_events_)
    for (const PendingFree& entry : queue)
      if (pending.insert(entry.block).second) consider(entry.block);
  std::sort(heads.begin(), heads.end(), [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
  return heads;
}

nlohmann::json CachingAllocator::segments_json() const {
  std::lock_guard lock(mutex_);
  const std::vector<Block*> heads = segment_heads();

  nlohmann::json segments = nlohmann::json::array();
  for (const Block* head : heads) {
    nlohmann::json blocks = nlohmann::json::array();
    size_t total = 0, allocated = 0, active = 0, requested = 0;
    for (const Block* block = head; block != nullptr; block = block->next) {
      const bool is_active = block->allocated || block->event_count > 0 || !block->stream_uses.empty();
      total += block->size;
      if (block->allocated) {
        allocated += block->size;
        requested += block->requested_size;
      }
      if (is_active) active += block->size;
      blocks.push_back({{"address", reinterpret_cast<uintptr_t>(block->ptr)},
                        {"size", block->size},
                        {"requested_size", is_active ? block->requested_size : 0},
                        {"state", block->allocated ? "active_allocated" : is_active ? "active_pending_free" : "inactive"},
                        {"frames", nlohmann::json::array()}});
    }
    segments.push_back({{"device", device_},
                        {"address", reinterpret_cast<uintptr_t>(head->ptr)},
                        {"total_size", total},
                        {"allocated_size", allocated},
                        {"active_size", active},
                        {"requested_size", requested},
                        {"stream", head->stream_id},
                        {"segment_type", head->pool->is_small ? "small" : "large"},
                        {"segment_pool_id", {0, 0}},
                        {"is_expandable", false},
                        {"frames", nlohmann::json::array()},
                        {"blocks", std::move(blocks)}});
  }
  return segments;
}

nlohmann::json CachingAllocator::trace_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json trace = nlohmann::json::array();
  for (const TraceEntry& entry : trace_) {
    nlohmann::json item = {{"action", entry.action},
                           {"addr", entry.address},
                           {"size", entry.size},
                           {"stream", entry.stream_id},
                           {"time_us", entry.time_us},
                           {"frames", nlohmann::json::array()}};
    if (std::string_view(entry.action) == "oom") item["device_free"] = entry.address;
    trace.push_back(std::move(item));
  }
  return trace;
}

}  // namespace ember::detail
