// DeviceMemoryAllocator: one cuda device's allocator as ember::cuda's memory API sees it.
//
// Note [Allocator modes]
// Which allocator a device gets is decided once, when its first allocator is made
// (memory.cpp): a user's PluggableAllocator if change_current_allocator installed one,
// else PYTORCH_CUDA_ALLOC_CONF's backend: native (CachingAllocator, with or without
// expandable segments) or cudaMallocAsync (AsyncDeviceAllocator). The modes answer the
// memory API as PyTorch's allocators do: the native one fully; cudaMallocAsync with
// the pool's reserved and used bytes only, and errors for snapshots and history; a
// pluggable one with errors for statistics and snapshots.
#pragma once

#include <cstddef>
#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "core/allocator.h"
#include "ember/cuda_allocator.h"
#include "ember/cuda_graph.h"
#include "memory/alloc_conf.h"
#include "memory/device_stats.h"
#include "runtime/backend.h"

namespace ember::detail {

class DeviceMemoryAllocator : public Allocator {
 public:
  /// "native", "cudaMallocAsync" or "pluggable".
  virtual const char* backend_name() const noexcept = 0;
  virtual void empty_cache() = 0;
  virtual DeviceStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  virtual void reset_accumulated_stats() = 0;
  virtual void set_memory_fraction(double fraction) = 0;
  /// set_allocator_settings (Note [Allocator settings at run time] in alloc_conf.h): only
  /// the native mode has tunables; cudaMallocAsync and a user's allocator ignore them, as
  /// PyTorch's do.
  virtual void apply_settings(const AllocatorConfig& /*config*/) {}
  virtual void record_history(bool enabled, size_t max_entries) = 0;
  /// PyTorch snapshot "segments" entries and "device_traces" entry of this device.
  virtual nlohmann::json segments_json() const = 0;
  virtual nlohmann::json trace_json() const = 0;
  /// Private pools of CUDA graphs and MemPools (Note [Graph private pools]): from begin to
  /// end, the allocations of a capture (or of the calling thread) come from `pool`. Only the
  /// native mode has private pools; the others refuse a capture (a CudaError that names the
  /// mode) and a MemPool (PyTorch's "... does not yet support createOrIncrefPool" Error),
  /// and have nothing to end or release.
  virtual void create_or_incref_pool(cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator,
                                     bool use_on_oom);
  virtual void begin_allocate_to_pool(cuda::MempoolId pool, uint64_t capture_id);
  virtual void begin_allocate_current_thread_to_pool(cuda::MempoolId pool);
  virtual void end_allocate_to_pool(cuda::MempoolId /*pool*/) noexcept {}
  virtual void release_pool(cuda::MempoolId /*pool*/) noexcept {}
  virtual int pool_use_count(cuda::MempoolId /*pool*/) const { return 0; }
};

/// backend:cudaMallocAsync on `device` (async_allocator.cpp).
std::unique_ptr<DeviceMemoryAllocator> make_async_allocator(Backend& backend, int device);
/// A user's pair on `device` (pluggable_allocator.cpp).
std::unique_ptr<DeviceMemoryAllocator> make_pluggable_allocator(const cuda::PluggableAllocator::Functions& functions,
                                                                int device);

}  // namespace ember::detail
