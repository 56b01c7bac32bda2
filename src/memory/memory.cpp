// The per-device caching allocators, the pinned allocator, and ember::cuda's memory API.
//
// Allocators are created on first use, one per device, over detail::undecorated_backend()
// (the stream sanitizer learns of their blocks from their reports instead). They
// are never destroyed: tensors in static objects may free into them during exit, after
// any registry destructor would have run.
#include "memory/memory.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "memory/caching_allocator.h"
#include "memory/caching_host_allocator.h"
#include "runtime/context.h"
#include "runtime/registry.h"

namespace ember::detail {
namespace {

StreamRef stream_ref(StreamState* stream) { return {stream->native(), stream->id(), stream->device()}; }

// An allocation belongs to the calling thread's current stream on the device.
class DeviceAllocator final : public Allocator {
 public:
  DeviceAllocator(Backend& backend, int device, const AllocatorConfig& config) : cache_(backend, device, config) {}
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    return cache_.malloc(nbytes, stream_ref(current_stream_state(cache_.device())));
  }
  void deallocate(void* ptr) noexcept override { cache_.free(ptr); }
  void record_stream(void* ptr, StreamState* stream) override { cache_.record_stream(ptr, stream_ref(stream)); }
  CachingAllocator& cache() noexcept { return cache_; }

 private:
  CachingAllocator cache_;
};

class PinnedAllocator final : public Allocator {
 public:
  explicit PinnedAllocator(Backend& backend) : cache_(backend) {}
  void* allocate(size_t nbytes) override { return cache_.malloc(nbytes); }
  void deallocate(void* ptr) noexcept override { cache_.free(ptr); }
  void record_stream(void* ptr, StreamState* stream) override { cache_.record_stream(ptr, stream_ref(stream)); }
  CachingHostAllocator& cache() noexcept { return cache_; }

 private:
  CachingHostAllocator cache_;
};

struct Registry {
  std::once_flag sized;
  std::unique_ptr<std::atomic<DeviceAllocator*>[]> devices;
  int device_count = 0;
  std::mutex mutex;  // creation and the history setting; never taken on the hot path
  bool history_enabled = false;
  size_t history_max_entries = 100000;
};

Registry& registry() {
  static auto* instance = new Registry;  // leaked on purpose, see the file comment
  return *instance;
}

void size_registry(Registry& r) {
  std::call_once(r.sized, [&] {
    r.device_count = backend().device_count();
    r.devices = std::make_unique<std::atomic<DeviceAllocator*>[]>(static_cast<size_t>(r.device_count));
    // cuda::reset_device returns the device's cache before its streams become invalid.
    set_device_reset_hook(&empty_device_cache);
  });
}

DeviceAllocator& device_allocator(int device) {
  Registry& r = registry();
  size_registry(r);
  EMBER_CHECK(device >= 0 && device < r.device_count, IndexError, "Device index value ", device,
              " is out of index range [0, ", r.device_count, ")");
  if (DeviceAllocator* existing = r.devices[device].load(std::memory_order_acquire)) return *existing;
  std::lock_guard lock(r.mutex);
  DeviceAllocator* allocator = r.devices[device].load(std::memory_order_relaxed);
  if (allocator == nullptr) {
    allocator = new DeviceAllocator(undecorated_backend(), device, env_alloc_config());
    if (r.history_enabled) allocator->cache().record_history(true, r.history_max_entries);
    r.devices[device].store(allocator, std::memory_order_release);
  }
  return *allocator;
}

// Allocators that exist now; devices never used have none.
std::vector<DeviceAllocator*> existing_allocators() {
  Registry& r = registry();
  size_registry(r);  // also orders this read after the sizing on another thread
  std::vector<DeviceAllocator*> result;
  for (int device = 0; device < r.device_count; ++device)
    result.push_back(r.devices[device].load(std::memory_order_acquire));
  return result;
}

PinnedAllocator& pinned() {
  static auto* instance = new PinnedAllocator(undecorated_backend());  // leaked on purpose
  return *instance;
}

int resolve(int device) {
  if (device == -1) return current_device_index();
  check_device_index(device);
  return device;
}

CachingAllocator& cache_of(int device) { return device_allocator(resolve(device)).cache(); }

}  // namespace

Allocator& cuda_allocator(int device) { return device_allocator(device); }

Allocator& pinned_allocator() { return pinned(); }

void empty_device_cache(int device) {
  Registry& r = registry();
  size_registry(r);
  if (device < 0 || device >= r.device_count) return;
  if (DeviceAllocator* allocator = r.devices[device].load(std::memory_order_acquire)) allocator->cache().empty_cache();
}

// CUDA graphs' private pools (Note [Graph private pools]).
void begin_allocate_to_pool(int device, cuda::MempoolId pool, uint64_t capture_id) {
  device_allocator(device).cache().begin_allocate_to_pool(pool, capture_id);
}
void end_allocate_to_pool(int device, cuda::MempoolId pool) noexcept {
  device_allocator(device).cache().end_allocate_to_pool(pool);
}
void release_pool(int device, cuda::MempoolId pool) noexcept { device_allocator(device).cache().release_pool(pool); }

}  // namespace ember::detail

namespace ember::cuda {

using detail::cache_of;

size_t memory_allocated(int device) {
  return static_cast<size_t>(cache_of(device).stats().allocated_bytes[detail::kAggregate].current);
}

size_t max_memory_allocated(int device) {
  return static_cast<size_t>(cache_of(device).stats().allocated_bytes[detail::kAggregate].peak);
}

size_t memory_reserved(int device) {
  return static_cast<size_t>(cache_of(device).stats().reserved_bytes[detail::kAggregate].current);
}

size_t max_memory_reserved(int device) {
  return static_cast<size_t>(cache_of(device).stats().reserved_bytes[detail::kAggregate].peak);
}

void reset_peak_memory_stats(int device) { cache_of(device).reset_peak_stats(); }

void reset_accumulated_memory_stats(int device) { cache_of(device).reset_accumulated_stats(); }

void empty_cache() {
  for (detail::DeviceAllocator* allocator : detail::existing_allocators())
    if (allocator) allocator->cache().empty_cache();
}

std::map<std::string, int64_t> memory_stats(int device) { return cache_of(device).stats().to_map(); }

std::string memory_summary(int device) {
  const int index = detail::resolve(device);
  return detail::format_memory_summary(memory_stats(index), index);
}

std::string memory_snapshot_json() {
  nlohmann::json segments = nlohmann::json::array();
  nlohmann::json traces = nlohmann::json::array();
  detail::Registry& r = detail::registry();
  detail::size_registry(r);
  for (detail::DeviceAllocator* allocator : detail::existing_allocators()) {
    if (allocator == nullptr) {
      traces.push_back(nlohmann::json::array());
      continue;
    }
    for (auto& segment : allocator->cache().segments_json()) segments.push_back(std::move(segment));
    traces.push_back(allocator->cache().trace_json());
  }
  const detail::AllocatorConfig& config = detail::env_alloc_config();
  nlohmann::json settings = {{"PYTORCH_NO_CUDA_MEMORY_CACHING", !config.caching_enabled},
                             {"expandable_segments", config.expandable_segments},
                             {"garbage_collection_threshold", config.garbage_collection_threshold}};
  if (config.max_split_size != std::numeric_limits<size_t>::max()) settings["max_split_size"] = config.max_split_size;
  return nlohmann::json{{"segments", std::move(segments)}, {"device_traces", std::move(traces)},
                        {"allocator_settings", std::move(settings)}}
      .dump();
}

void record_memory_history(bool enabled, size_t max_entries) {
  detail::Registry& r = detail::registry();
  detail::size_registry(r);
  std::lock_guard lock(r.mutex);
  r.history_enabled = enabled;
  r.history_max_entries = max_entries;
  for (detail::DeviceAllocator* allocator : detail::existing_allocators())
    if (allocator) allocator->cache().record_history(enabled, max_entries);
}

std::pair<size_t, size_t> mem_get_info(int device) { return detail::backend().mem_get_info(detail::resolve(device)); }

void set_per_process_memory_fraction(double fraction, int device) { cache_of(device).set_memory_fraction(fraction); }

std::map<std::string, int64_t> host_memory_stats() { return detail::pinned().cache().stats(); }

}  // namespace ember::cuda
