// CachingAllocator: deferred frees of blocks used by other streams (record_stream).
//
// A freed block that other streams used gets one event per such stream; it returns to
// the cache when all of them have completed. malloc polls the events (query, never
// a wait); only empty_cache and the out-of-memory retry synchronize on them.
#include "memory/caching_allocator.h"

namespace ember::detail {

BackendEvent* CachingAllocator::acquire_event(int device) {
  // Events of this device are pooled: creating one per free would cost more than the free.
  if (device == device_ && !event_pool_.empty()) {
    BackendEvent* event = event_pool_.back();
    event_pool_.pop_back();
    return event;
  }
  return backend_.create_event(device, /*enable_timing=*/false);
}

void CachingAllocator::release_event(int device, BackendEvent* event) noexcept {
  if (device != device_) {
    backend_.destroy_event(event);
    return;
  }
  try {
    event_pool_.push_back(event);
  } catch (...) {
    backend_.destroy_event(event);
  }
}

void CachingAllocator::insert_events(Block* block) {
  std::vector<StreamRef> uses;
  uses.swap(block->stream_uses);
  for (const StreamRef& use : uses) {
    BackendEvent* event = nullptr;
    try {
      event = acquire_event(use.device);
      backend_.record(event, use.native);
      pending_events_[use.native].push_back({event, use.device, block});
      ++block->event_count;
    } catch (...) {
      // Could not defer on this stream: wait for it instead, so reuse stays safe.
      if (event) release_event(use.device, event);
      try {
        backend_.synchronize(use.native);
      } catch (...) {
      }
    }
  }
}

void CachingAllocator::process_events() {
  for (auto it = pending_events_.begin(); it != pending_events_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      auto [event, event_device, block] = queue.front();
      if (!backend_.query(event)) break;  // later events of this stream are later in its queue
      queue.pop_front();
      release_event(event_device, event);
      if (--block->event_count == 0) free_block(block);
    }
    it = queue.empty() ? pending_events_.erase(it) : std::next(it);
  }
}

void CachingAllocator::synchronize_and_free_events() {
  ++stats_.num_sync_all_streams;
  for (auto it = pending_events_.begin(); it != pending_events_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      auto [event, event_device, block] = queue.front();
      backend_.synchronize(event);
      queue.pop_front();
      release_event(event_device, event);
      if (--block->event_count == 0) free_block(block);
    }
    it = pending_events_.erase(it);
  }
}

}  // namespace ember::detail
