// MemPool and use_mem_pool (torch.cuda.MemPool, torch.cuda.use_mem_pool) over the caching
// allocator's private pools (Note [Graph private pools] in caching_allocator_graphs.cpp).
// A MemPool holds one use of its pool and each active guard another, as PyTorch's
// createOrIncrefPool / beginAllocateToPool do; so a pool outlives its MemPool while a guard
// or a graph uses it, and its memory while a tensor from it lives.
#include "ember/cuda_mem_pool.h"

#include <atomic>
#include <utility>

#include "ember/cuda_allocator.h"
#include "ember/errors.h"
#include "memory/device_allocator.h"
#include "memory/memory.h"
#include "runtime/context.h"

namespace ember::detail {

cuda::MempoolId new_user_mempool_id() noexcept {
  static std::atomic<uint64_t> next{1};
  return {0, next.fetch_add(1, std::memory_order_relaxed)};
}

}  // namespace ember::detail

namespace ember::cuda {

MemPool::MemPool(std::shared_ptr<PluggableAllocator> allocator, bool use_on_oom)
    : device_(detail::current_device_index()), allocator_(std::move(allocator)) {
  const MempoolId id = detail::new_user_mempool_id();
  std::shared_ptr<detail::Allocator> segments;
  if (allocator_) segments = detail::make_pluggable_allocator(allocator_->functions(), device_);
  detail::create_or_incref_pool(device_, id, std::move(segments), use_on_oom);
  id_ = id;
}

MemPool::~MemPool() { release(); }

MemPool::MemPool(MemPool&& other) noexcept
    : id_(std::exchange(other.id_, {})),
      device_(std::exchange(other.device_, -1)),
      allocator_(std::move(other.allocator_)) {}

MemPool& MemPool::operator=(MemPool&& other) noexcept {
  if (this != &other) {
    release();
    id_ = std::exchange(other.id_, {});
    device_ = std::exchange(other.device_, -1);
    allocator_ = std::move(other.allocator_);
  }
  return *this;
}

void MemPool::release() noexcept {
  if (!id_.empty()) detail::release_pool(device_, id_);
  id_ = {};
  device_ = -1;
  allocator_.reset();
}

int64_t MemPool::use_count() const { return id_.empty() ? 0 : detail::pool_use_count(device_, id_); }

std::string MemPool::snapshot() const { return id_.empty() ? "[]" : detail::pool_snapshot_json(id_); }

namespace {

int cuda_device_index(Device device) {
  EMBER_CHECK(device.is_cuda(), ValueError, "Expected a cuda device, but got: ", device.str());
  return device.index();
}

}  // namespace

use_mem_pool::use_mem_pool(const MemPool& pool, Device device) : use_mem_pool(pool, cuda_device_index(device)) {}

use_mem_pool::use_mem_pool(const MemPool& pool, int device) : id_(pool.id()), device_(detail::resolve_index(device)) {
  EMBER_CHECK(!id_.empty(), ValueError, "use_mem_pool: the MemPool was moved from and has no pool");
  EMBER_CHECK(device_ == pool.device(), ValueError, "use_mem_pool: MemPool (", id_.first, ", ", id_.second,
              ") was made on cuda:", pool.device(), " and has no pool on cuda:", device_);
  detail::begin_allocate_current_thread_to_pool(device_, id_);
}

use_mem_pool::~use_mem_pool() {
  detail::end_allocate_to_pool(device_, id_);
  detail::release_pool(device_, id_);
}

}  // namespace ember::cuda
