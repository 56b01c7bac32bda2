// CachingHostAllocator: see Note [Pinned block reuse] in caching_host_allocator.h.
#include "memory/caching_host_allocator.h"

#include <bit>
#include <chrono>

#include "ember/errors.h"
#include "memory/host_register.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail {
namespace {

constexpr size_t kMaxPinnedRequest = size_t{1} << 62;  // beyond this bit_ceil overflows

}  // namespace

CachingHostAllocator::CachingHostAllocator(Backend& backend, bool use_host_register, size_t register_threads,
                                           bool background_thread)
    : backend_(backend),
      use_host_register_(use_host_register),
      register_threads_(register_threads),
      background_events_(background_thread) {
  if (background_events_) background_ = std::thread([this] { background_loop(); });
}

CachingHostAllocator::~CachingHostAllocator() {
  if (background_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    pending_changed_.notify_all();
    background_.join();
  }
  std::lock_guard lock(mutex_);
  try {
    for (const PendingFree& entry : pending_) backend_.synchronize(entry.event);
  } catch (...) {
  }
  for (const PendingFree& entry : pending_) {
    backend_.destroy_event(entry.event);
    if (--entry.block->event_count == 0) make_available(entry.block);
  }
  pending_.clear();
  release_free_blocks();
  // Blocks still in use keep their pinned memory; only the bookkeeping goes.
  blocks_.for_each([](Block* block) { delete block; });
}

void* CachingHostAllocator::malloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  EMBER_CHECK(bytes <= kMaxPinnedRequest, OutOfMemoryError, "CUDA out of memory. Tried to allocate ",
              format_size(bytes), " of pinned host memory");
  const size_t size = std::bit_ceil(bytes);
  const size_t size_class = std::bit_width(size) - 1;
  std::lock_guard lock(mutex_);
  // Note [Pinned reuse during capture]; with the background thread, it polls instead.
  if (!background_events_ && !pending_.empty() && !backend_.any_capture_open()) process_events();
  Block* block = nullptr;
  if (auto& cached = free_blocks_[size_class]; !cached.empty()) {
    block = cached.back();
    cached.pop_back();
  } else {
    bool registered = use_host_register_;
    auto allocate = [&] {
      void* memory = registered ? alloc_registered_host_memory(backend_, size, register_threads_) : nullptr;
      if (memory == nullptr) {
        registered = false;  // no registration on this backend, or no host memory
        memory = backend_.pinned_alloc(size);
      }
      return memory;
    };
    void* ptr = allocate();
    if (ptr == nullptr) {
      // Give the cache back to the system and try once more, as the device allocator does.
      release_free_blocks();
      registered = use_host_register_;
      ptr = allocate();
    }
    EMBER_CHECK(ptr != nullptr, OutOfMemoryError, "CUDA out of memory. Tried to allocate ", format_size(bytes),
                " of pinned host memory (", format_size(static_cast<uint64_t>(reserved_bytes_.current)),
                " is held by the pinned memory cache)");
    block = new Block;
    block->ptr = ptr;
    block->size = size;
    block->registered = registered;
    blocks_.insert(block);
    segment_.increase(1);
    reserved_bytes_.increase(static_cast<int64_t>(size));
    ++num_host_alloc_;
  }
  block->allocated = true;
  allocation_.increase(1);
  allocated_bytes_.increase(static_cast<int64_t>(block->size));
  return block->ptr;
}

void CachingHostAllocator::free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  Block* block = blocks_.find(ptr);
  EMBER_ASSERT(block != nullptr && block->allocated);  // not a live pinned block
  block->allocated = false;
  allocation_.decrease(1);
  allocated_bytes_.decrease(static_cast<int64_t>(block->size));
  if (sanitizer::enabled()) [[unlikely]] {
    std::vector<const void*> waited;
    for (const StreamRef& use : block->stream_uses) waited.push_back(use.native);
    sanitizer::on_deallocation(block->ptr, block->size, nullptr, waited);  // reused by the host
  }
  std::vector<StreamRef> uses;
  uses.swap(block->stream_uses);
  for (const StreamRef& use : uses) {
    BackendEvent* event = nullptr;
    try {
      event = backend_.create_event(use.device, /*enable_timing=*/false);
      backend_.record(event, use.native);
      pending_.push_back({event, block});
      ++block->event_count;
      if (background_events_) pending_changed_.notify_one();
    } catch (...) {
      // Could not defer: wait for the stream so the block is safe to reuse.
      if (event) backend_.destroy_event(event);
      try {
        backend_.synchronize(use.native);
      } catch (...) {
      }
    }
  }
  if (block->event_count == 0) make_available(block);
}

void CachingHostAllocator::record_stream(void* ptr, StreamRef stream) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  Block* block = blocks_.find(ptr);
  EMBER_CHECK(block != nullptr && block->allocated, ValueError, "record_stream: pointer ", ptr,
              " is not a live block of the pinned memory allocator");
  for (const StreamRef& use : block->stream_uses)
    if (use.native == stream.native) return;
  block->stream_uses.push_back(stream);
}

void CachingHostAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  if (!pending_.empty() && !backend_.any_capture_open()) process_events();
  release_free_blocks();
}

void CachingHostAllocator::set_register_options(bool use_host_register, size_t register_threads) {
  std::lock_guard lock(mutex_);
  use_host_register_ = use_host_register;
  register_threads_ = register_threads;
}

size_t CachingHostAllocator::pending_frees() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

bool CachingHostAllocator::wait_for_background_pass(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  if (!background_events_) return true;
  // A pass runs under mutex_, so the next one sees every event recorded before this call.
  const uint64_t target = background_passes_ + 1;
  pending_changed_.notify_one();
  return passes_changed_.wait_for(lock, limit, [&] { return background_passes_ >= target || pending_.empty(); });
}

void CachingHostAllocator::background_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    pending_changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    // A sticky device error makes query throw: the events are left for the destructor.
    try {
      if (!backend_.any_capture_open()) process_events();  // Note [Pinned reuse during capture]
    } catch (...) {
    }
    ++background_passes_;
    passes_changed_.notify_all();
    // PyTorch's thread polls every 100 us; it sleeps only while events are pending.
    if (!pending_.empty()) pending_changed_.wait_for(lock, std::chrono::microseconds(100), [&] { return stopping_; });
  }
}

std::map<std::string, int64_t> CachingHostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, int64_t> out;
  const std::pair<const char*, const Stat*> stats[] = {{"allocation", &allocation_},
                                                       {"segment", &segment_},
                                                       {"allocated_bytes", &allocated_bytes_},
                                                       {"reserved_bytes", &reserved_bytes_}};
  for (const auto& [name, stat] : stats) {
    out[std::string(name) + ".current"] = stat->current;
    out[std::string(name) + ".peak"] = stat->peak;
    out[std::string(name) + ".allocated"] = stat->allocated;
    out[std::string(name) + ".freed"] = stat->freed;
  }
  out["num_host_alloc"] = num_host_alloc_;
  out["num_host_free"] = num_host_free_;
  return out;
}

// Note [Pinned reuse during capture]
// Querying an event while a graph is being captured can invalidate the capture: always
// when the event was recorded in it, and, from a thread in Global mode, whenever any
// Global capture is open. So while any capture is open the pending events are left
// alone and their blocks wait; a malloc meanwhile takes a cached block or new memory
// (PyTorch's fix, pytorch#146924).
void CachingHostAllocator::process_events() {
  // Events complete roughly in record order; a later one may be done before an
  // earlier one on another stream, so scan all rather than stop at the first.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!backend_.query(it->event)) {
      ++it;
      continue;
    }
    backend_.destroy_event(it->event);
    Block* block = it->block;
    it = pending_.erase(it);
    if (--block->event_count == 0) make_available(block);
  }
}

void CachingHostAllocator::make_available(Block* block) {
  free_blocks_[std::bit_width(block->size) - 1].push_back(block);
}

void CachingHostAllocator::release_free_blocks() {
  for (auto& cached : free_blocks_) {
    for (Block* block : cached) {
      if (block->registered) free_registered_host_memory(backend_, block->ptr);
      else backend_.pinned_free(block->ptr);
      if (sanitizer::enabled()) [[unlikely]]
        sanitizer::on_release(block->ptr, block->size, -1);
      segment_.decrease(1);
      reserved_bytes_.decrease(static_cast<int64_t>(block->size));
      ++num_host_free_;
      blocks_.erase(block->ptr);
      delete block;
    }
    cached.clear();
  }
}

}  // namespace ember::detail
