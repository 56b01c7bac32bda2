// CachingAllocator: the allocation history and PyTorch-schema snapshots.
//
// Schema (torch.cuda.memory._snapshot(), read by torch/cuda/_memory_viz.py): a segment
// is {device, address, total_size, allocated_size, active_size, requested_size, stream,
// segment_type, segment_pool_id, is_expandable, frames, blocks}; a block is {address,
// size, requested_size, state, frames} with state active_allocated, active_pending_free
// or inactive; a trace entry is {action, addr, size, stream, time_us, frames}.
//
// Frames ({name, filename, line}, innermost first) are the C++ stack of the allocator call,
// recorded while record_history is on: capturing keeps return addresses only (a few
// microseconds); symbols, files and lines are looked up when a snapshot is written, once
// per distinct stack, outside the allocator's lock. An active block carries the stack of
// its allocation, or of its free while the free is pending; a cached block has none.
#include <algorithm>
#include <chrono>
#include <map>
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

namespace {

// Deep enough to reach the user's code from the allocator through ops and factories.
constexpr int kMaxContextFrames = 48;

// Frames JSON for stacks, symbolised once per distinct stack of one snapshot.
class FramesWriter {
 public:
  nlohmann::json operator()(const std::shared_ptr<const StackTrace>& context) {
    if (!context || context->empty()) return nlohmann::json::array();
    auto [it, inserted] = cache_.try_emplace(context->addresses());
    if (inserted) {
      it->second = nlohmann::json::array();
      for (const StackFrame& frame : context->frames())
        it->second.push_back({{"name", frame.function}, {"filename", frame.file}, {"line", frame.line}});
    }
    return it->second;
  }

 private:
  std::map<std::vector<void*>, nlohmann::json> cache_;  // equal stacks captured apart share one entry
};

}  // namespace

CachingAllocator::Context CachingAllocator::capture_context() {
  // Skips this function, so frame 0 is the allocator call that records.
  return std::make_shared<const StackTrace>(StackTrace::capture(1, kMaxContextFrames));
}

void CachingAllocator::record_trace(const char* action, uintptr_t address, size_t size, uint64_t stream_id,
                                    Context context) {
  // Bounded: the oldest entries go first, as in PyTorch's ring buffer.
  if (trace_.size() >= trace_capacity_) trace_.pop_front();
  const auto now =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
  trace_.push_back({action, address, size, stream_id, static_cast<int64_t>(now.count()), std::move(context)});
}

std::vector<CachingAllocator::Block*> CachingAllocator::segment_heads() const {
  // Every segment's first block is cached, allocated, or waiting for its events. An
  // expandable segment shows as one segment per contiguous mapped range, as in PyTorch.
  std::vector<Block*> heads;
  auto consider = [&](Block* block) {
    if (block->prev == nullptr || !block->prev->mapped) heads.push_back(block);
  };
  for (const BlockPool* pool : {&small_pool_, &large_pool_})
    for (const PoolEntry& entry : pool->blocks) consider(entry.block);
  for (const auto& [id, pool] : graph_pools_)
    for (const BlockPool* private_pool : {&pool->small, &pool->large})
      for (const PoolEntry& entry : private_pool->blocks) consider(entry.block);
  for (Block* block : deferred_event_blocks_) consider(block);
  allocated_.for_each(consider);
  std::unordered_set<Block*> pending;
  for (const auto& [stream, queue] : pending_events_)
    for (const PendingFree& entry : queue)
      if (pending.insert(entry.block).second) consider(entry.block);
  std::sort(heads.begin(), heads.end(), [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
  return heads;
}

nlohmann::json CachingAllocator::segments_json() const {
  nlohmann::json segments = nlohmann::json::array();
  std::vector<std::pair<nlohmann::json*, Context>> block_contexts;  // filled in after the lock
  {
    std::lock_guard lock(mutex_);
    const std::vector<Block*> heads = segment_heads();
    for (const Block* head : heads) {
      nlohmann::json blocks = nlohmann::json::array();
      size_t total = 0, allocated = 0, active = 0, requested = 0;
      for (const Block* block = head; block != nullptr && block->mapped; block = block->next) {
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
                          {"state", block->allocated ? "active_allocated"
                                    : is_active      ? "active_pending_free"
                                                     : "inactive"},
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
                          {"segment_pool_id",
                           head->pool->owner ? nlohmann::json{head->pool->owner->id.first, head->pool->owner->id.second}
                                             : nlohmann::json{0, 0}},
                          {"is_expandable", head->expandable != nullptr},
                          {"frames", nlohmann::json::array()},
                          {"blocks", std::move(blocks)}});
    }
    // The JSON is complete, so pointers into it stay valid; pair them with the stacks.
    size_t segment_index = 0;
    for (const Block* head : heads) {
      nlohmann::json& blocks = segments[segment_index++]["blocks"];
      size_t block_index = 0;
      for (const Block* block = head; block != nullptr && block->mapped; block = block->next, ++block_index)
        if (block->context) block_contexts.emplace_back(&blocks[block_index]["frames"], block->context);
    }
  }
  FramesWriter frames;
  for (auto& [target, context] : block_contexts) *target = frames(context);
  return segments;
}

nlohmann::json CachingAllocator::trace_json() const {
  std::vector<TraceEntry> entries;
  {
    std::lock_guard lock(mutex_);
    entries.assign(trace_.begin(), trace_.end());
  }
  FramesWriter frames;
  nlohmann::json trace = nlohmann::json::array();
  for (const TraceEntry& entry : entries) {
    nlohmann::json item = {{"action", entry.action},    {"addr", entry.address},    {"size", entry.size},
                           {"stream", entry.stream_id}, {"time_us", entry.time_us}, {"frames", frames(entry.context)}};
    if (std::string_view(entry.action) == "oom") item["device_free"] = entry.address;
    trace.push_back(std::move(item));
  }
  return trace;
}

}  // namespace ember::detail
