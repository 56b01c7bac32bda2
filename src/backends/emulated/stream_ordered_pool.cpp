// StreamOrderedPool: see Note [Emulated stream-ordered pool] in stream_ordered_pool.h.
#include "backends/emulated/stream_ordered_pool.h"

#include <algorithm>
#include <vector>

namespace ember::detail::emulated {
namespace {

constexpr size_t kGranularity = 512;

}  // namespace

void* StreamOrderedPool::allocate(size_t bytes, const void* stream) {
  const size_t size = (std::max<size_t>(bytes, 1) + kGranularity - 1) / kGranularity * kGranularity;
  std::lock_guard lock(mutex_);
  // The smallest free block this stream may use, if it is not more than twice the request.
  for (auto it = free_by_size_.lower_bound(size); it != free_by_size_.end() && it->first <= 2 * size; ++it) {
    Block& block = blocks_.at(it->second);
    if (!block.reached && block.free_stream != stream) continue;
    void* ptr = it->second;
    free_by_size_.erase(it);
    block.allocated = true;
    add_used(static_cast<int64_t>(block.size));
    return ptr;
  }
  void* ptr = memory_.allocate(size);
  if (ptr == nullptr) {
    release_reached();
    ptr = memory_.allocate(size);
    if (ptr == nullptr) return nullptr;
  }
  blocks_.emplace(ptr, Block{size, true, nullptr, false, 0, 0});
  add_reserved(static_cast<int64_t>(size));
  add_used(static_cast<int64_t>(size));
  return ptr;
}

bool StreamOrderedPool::free(void* ptr, const void* stream, uint64_t& generation) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(ptr);
  if (it == blocks_.end() || !it->second.allocated) return false;
  Block& block = it->second;
  block.allocated = false;
  block.free_stream = stream;
  block.reached = false;
  generation = ++block.generation;
  block.freed_at = ++frees_;
  free_by_size_.emplace(block.size, ptr);
  add_used(-static_cast<int64_t>(block.size));
  return true;
}

void StreamOrderedPool::reached(void* ptr, uint64_t generation) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(ptr);
  // Reused on its stream (and maybe freed again) since: that free's own marker decides.
  if (it == blocks_.end() || it->second.allocated || it->second.generation != generation) return;
  it->second.reached = true;
}

void StreamOrderedPool::release_reached() {
  for (auto it = free_by_size_.begin(); it != free_by_size_.end();) {
    auto block = blocks_.find(it->second);
    if (!block->second.reached) {
      ++it;
      continue;
    }
    memory_.release(block->first);
    add_reserved(-static_cast<int64_t>(block->second.size));
    blocks_.erase(block);
    it = free_by_size_.erase(it);
  }
}

uint64_t StreamOrderedPool::frees() const {
  std::lock_guard lock(mutex_);
  return frees_;
}

void StreamOrderedPool::trim(uint64_t passed) {
  std::lock_guard lock(mutex_);
  for (auto& [ptr, block] : blocks_)
    if (!block.allocated && block.freed_at <= passed) block.reached = true;
  release_reached();
}

void StreamOrderedPool::add_reserved(int64_t bytes) {
  usage_.reserved_current = static_cast<uint64_t>(static_cast<int64_t>(usage_.reserved_current) + bytes);
  usage_.reserved_high = std::max(usage_.reserved_high, usage_.reserved_current);
}

void StreamOrderedPool::add_used(int64_t bytes) {
  usage_.used_current = static_cast<uint64_t>(static_cast<int64_t>(usage_.used_current) + bytes);
  usage_.used_high = std::max(usage_.used_high, usage_.used_current);
}

Backend::PoolUsage StreamOrderedPool::usage() const {
  std::lock_guard lock(mutex_);
  return usage_;
}

void StreamOrderedPool::reset_peaks() {
  std::lock_guard lock(mutex_);
  usage_.reserved_high = usage_.reserved_current;
  usage_.used_high = usage_.used_current;
}

}  // namespace ember::detail::emulated
