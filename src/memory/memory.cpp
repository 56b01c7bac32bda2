// The per-device allocators, the pinned allocator, and ember::cuda's memory API.
//
// Allocators are created on first use, one per device, in the mode Note [Allocator modes]
// (memory/device_allocator.h) picks, over detail::undecorated_backend()
// (the stream sanitizer learns of their blocks from their reports instead). They
// are never destroyed: tensors in static objects may free into them during exit, after
// any registry destructor would have run.
#include "memory/memory.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/cuda_allocator.h"
#include "ember/errors.h"
#include "memory/blas_workspace.h"
#include "memory/caching_allocator.h"
#include "memory/caching_host_allocator.h"
#include "memory/device_allocator.h"
#include "runtime/context.h"
#include "runtime/registry.h"

namespace ember::detail {
namespace {

StreamRef stream_ref(StreamState* stream) { return {stream->native(), stream->id(), stream->device()}; }

// The native mode. An allocation belongs to the calling thread's current stream on the device.
class DeviceAllocator final : public DeviceMemoryAllocator {
 public:
  DeviceAllocator(Backend& backend, int device, const AllocatorConfig& config) : cache_(backend, device, config) {}
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    return cache_.malloc(nbytes, stream_ref(current_stream_state(cache_.device())));
  }
  void deallocate(void* ptr) noexcept override { cache_.free(ptr); }
  void record_stream(void* ptr, StreamState* stream) override { cache_.record_stream(ptr, stream_ref(stream)); }
  CachingAllocator& cache() noexcept { return cache_; }

  const char* backend_name() const noexcept override { return "native"; }
  void empty_cache() override { cache_.empty_cache(); }
  DeviceStats stats() const override { return cache_.stats(); }
  void reset_peak_stats() override { cache_.reset_peak_stats(); }
  void reset_accumulated_stats() override { cache_.reset_accumulated_stats(); }
  void set_memory_fraction(double fraction) override { cache_.set_memory_fraction(fraction); }
  void apply_settings(const AllocatorConfig& config) override { cache_.apply_settings(config); }
  void record_history(bool enabled, size_t max_entries) override { cache_.record_history(enabled, max_entries); }
  nlohmann::json segments_json() const override { return cache_.segments_json(); }
  nlohmann::json trace_json() const override { return cache_.trace_json(); }
  void create_or_incref_pool(cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator,
                             bool use_on_oom) override {
    cache_.create_or_incref_pool(pool, std::move(segment_allocator), use_on_oom);
  }
  void begin_allocate_to_pool(cuda::MempoolId pool, uint64_t capture_id) override {
    cache_.begin_allocate_to_pool(pool, capture_id);
  }
  void begin_allocate_current_thread_to_pool(cuda::MempoolId pool) override {
    cache_.begin_allocate_to_pool(pool, std::this_thread::get_id());
  }
  void end_allocate_to_pool(cuda::MempoolId pool) noexcept override { cache_.end_allocate_to_pool(pool); }
  void release_pool(cuda::MempoolId pool) noexcept override { cache_.release_pool(pool); }
  int pool_use_count(cuda::MempoolId pool) const override { return cache_.pool_use_count(pool); }

 private:
  CachingAllocator cache_;
};

class PinnedAllocator final : public Allocator {
 public:
  PinnedAllocator(Backend& backend, const AllocatorConfig& config)
      : cache_(backend, config.pinned_use_host_register, config.pinned_num_register_threads,
               config.pinned_use_background_threads) {}
  void* allocate(size_t nbytes) override { return cache_.malloc(nbytes); }
  void deallocate(void* ptr) noexcept override { cache_.free(ptr); }
  void record_stream(void* ptr, StreamState* stream) override { cache_.record_stream(ptr, stream_ref(stream)); }
  CachingHostAllocator& cache() noexcept { return cache_; }

 private:
  CachingHostAllocator cache_;
};

struct Registry {
  std::once_flag sized;
  std::unique_ptr<std::atomic<DeviceMemoryAllocator*>[]> devices;
  int device_count = 0;
  std::mutex mutex;  // creation, the mode and the history setting; never taken on the hot path
  bool history_enabled = false;
  size_t history_max_entries = 100000;
  bool initialized = false;                                      // some device allocator exists: the mode is fixed
  std::optional<cuda::PluggableAllocator::Functions> pluggable;  // as installed
};

// With r.mutex held: the mode the next device allocator is made in.
const char* mode_name(const Registry& r) {
  if (r.pluggable) return "pluggable";
  return env_alloc_config().use_async_allocator ? "cudaMallocAsync" : "native";
}

Registry& registry() {
  static auto* instance = new Registry;  // leaked on purpose, see the file comment
  return *instance;
}

void size_registry(Registry& r) {
  std::call_once(r.sized, [&] {
    r.device_count = backend().device_count();
    r.devices = std::make_unique<std::atomic<DeviceMemoryAllocator*>[]>(static_cast<size_t>(r.device_count));
    // cuda::reset_device returns the device's cache before its streams become invalid.
    set_device_reset_hook(&empty_device_cache);
  });
}

DeviceMemoryAllocator& device_allocator(int device) {
  Registry& r = registry();
  size_registry(r);
  EMBER_CHECK(device >= 0 && device < r.device_count, IndexError, "Device index value ", device,
              " is out of index range [0, ", r.device_count, ")");
  if (DeviceMemoryAllocator* existing = r.devices[device].load(std::memory_order_acquire)) return *existing;
  std::lock_guard lock(r.mutex);
  DeviceMemoryAllocator* allocator = r.devices[device].load(std::memory_order_relaxed);
  if (allocator == nullptr) {
    const AllocatorConfig config = current_alloc_config();
    std::unique_ptr<DeviceMemoryAllocator> made;
    if (r.pluggable) made = make_pluggable_allocator(*r.pluggable, device);
    else if (config.use_async_allocator) made = make_async_allocator(undecorated_backend(), device);
    else made = std::make_unique<DeviceAllocator>(undecorated_backend(), device, config);
    if (r.history_enabled) made->record_history(true, r.history_max_entries);
    allocator = made.release();
    r.initialized = true;
    r.devices[device].store(allocator, std::memory_order_release);
  }
  return *allocator;
}

// Allocators that exist now; devices never used have none.
std::vector<DeviceMemoryAllocator*> existing_allocators() {
  Registry& r = registry();
  size_registry(r);  // also orders this read after the sizing on another thread
  std::vector<DeviceMemoryAllocator*> result;
  for (int device = 0; device < r.device_count; ++device)
    result.push_back(r.devices[device].load(std::memory_order_acquire));
  return result;
}

PinnedAllocator& pinned() {
  static auto* instance = new PinnedAllocator(undecorated_backend(), current_alloc_config());  // leaked on purpose
  return *instance;
}

int resolve(int device) {
  if (device == -1) return current_device_index();
  check_device_index(device);
  return device;
}

DeviceMemoryAllocator& cache_of(int device) { return device_allocator(resolve(device)); }

}  // namespace

Allocator& cuda_allocator(int device) { return device_allocator(device); }

Allocator& pinned_allocator() { return pinned(); }

void empty_device_cache(int device) {
  Registry& r = registry();
  size_registry(r);
  if (device < 0 || device >= r.device_count) return;
  clear_blas_workspaces(device);  // their memory does not outlive a device reset
  if (DeviceMemoryAllocator* allocator = r.devices[device].load(std::memory_order_acquire)) allocator->empty_cache();
}

// CUDA graphs' private pools (Note [Graph private pools]).
void DeviceMemoryAllocator::begin_allocate_to_pool(cuda::MempoolId /*pool*/, uint64_t /*capture_id*/) {
  fail<CudaError>("CUDA graph capture needs the native allocator: this device's allocator is ", backend_name(),
                  ", which has no private memory pools for captured allocations");
}

namespace {
// A MemPool in another mode, as PyTorch's cudaMallocAsync and CUDAPluggableAllocator refuse one.
[[noreturn]] void refuse_mem_pool(const char* backend_name) {
  fail<Error>(std::string_view(backend_name) == "pluggable" ? "CUDAPluggableAllocator" : backend_name,
              " does not yet support createOrIncrefPool. If you need it, please file an issue describing your use "
              "case.");
}
}  // namespace

void DeviceMemoryAllocator::create_or_incref_pool(cuda::MempoolId /*pool*/, std::shared_ptr<Allocator> /*allocator*/,
                                                  bool /*use_on_oom*/) {
  refuse_mem_pool(backend_name());
}
void DeviceMemoryAllocator::begin_allocate_current_thread_to_pool(cuda::MempoolId /*pool*/) {
  refuse_mem_pool(backend_name());
}

void begin_allocate_to_pool(int device, cuda::MempoolId pool, uint64_t capture_id) {
  device_allocator(device).begin_allocate_to_pool(pool, capture_id);
}
void begin_allocate_current_thread_to_pool(int device, cuda::MempoolId pool) {
  device_allocator(device).begin_allocate_current_thread_to_pool(pool);
}
void create_or_incref_pool(int device, cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator,
                           bool use_on_oom) {
  device_allocator(device).create_or_incref_pool(pool, std::move(segment_allocator), use_on_oom);
}
int pool_use_count(int device, cuda::MempoolId pool) { return device_allocator(device).pool_use_count(pool); }

std::string pool_snapshot_json(cuda::MempoolId pool) {
  nlohmann::json segments = nlohmann::json::array();
  const nlohmann::json id = {pool.first, pool.second};
  for (DeviceMemoryAllocator* allocator : existing_allocators()) {
    // A live MemPool holds a use of its pool; the other modes have no pools (nor segments_json).
    if (allocator == nullptr || allocator->pool_use_count(pool) == 0) continue;
    for (auto& segment : allocator->segments_json())
      if (segment["segment_pool_id"] == id) segments.push_back(std::move(segment));
  }
  return segments.dump();
}

void end_allocate_to_pool(int device, cuda::MempoolId pool) noexcept {
  device_allocator(device).end_allocate_to_pool(pool);
}
void release_pool(int device, cuda::MempoolId pool) noexcept { device_allocator(device).release_pool(pool); }

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

namespace {
// PyTorch's FutureWarning for a renamed function, once per process (Python shows a warning
// once per call site; one program's first call is what a user sees).
void warn_renamed_once(std::atomic<bool>& warned, const char* old_name, const char* new_name) {
  if (!warned.exchange(true))
    std::fprintf(stderr, "FutureWarning: `torch.cuda.%s` has been renamed to `torch.cuda.%s`\n", old_name, new_name);
}
std::atomic<bool> memory_cached_warned{false}, max_memory_cached_warned{false};
}  // namespace

size_t memory_cached(int device) {
  warn_renamed_once(memory_cached_warned, "memory_cached", "memory_reserved");
  return memory_reserved(device);
}

size_t max_memory_cached(int device) {
  warn_renamed_once(max_memory_cached_warned, "max_memory_cached", "max_memory_reserved");
  return max_memory_reserved(device);
}

void reset_peak_memory_stats(int device) { cache_of(device).reset_peak_stats(); }

void reset_accumulated_memory_stats(int device) { cache_of(device).reset_accumulated_stats(); }

void empty_cache() {
  detail::Registry& r = detail::registry();
  std::function<void()> reset_fn;
  {
    std::lock_guard lock(r.mutex);
    if (r.pluggable) reset_fn = r.pluggable->reset_fn;
  }
  // A user's allocator is one allocator for all devices, as in PyTorch: one reset.
  if (reset_fn) return reset_fn();
  for (detail::DeviceMemoryAllocator* allocator : detail::existing_allocators())
    if (allocator) allocator->empty_cache();
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
  for (detail::DeviceMemoryAllocator* allocator : detail::existing_allocators()) {
    if (allocator == nullptr) {
      traces.push_back(nlohmann::json::array());
      continue;
    }
    for (auto& segment : allocator->segments_json()) segments.push_back(std::move(segment));
    traces.push_back(allocator->trace_json());
  }
  const detail::AllocatorConfig config = detail::current_alloc_config();
  nlohmann::json settings = {{"PYTORCH_NO_CUDA_MEMORY_CACHING", !config.caching_enabled},
                             {"expandable_segments", config.expandable_segments},
                             {"garbage_collection_threshold", config.garbage_collection_threshold}};
  if (config.max_split_size != std::numeric_limits<size_t>::max()) settings["max_split_size"] = config.max_split_size;
  return nlohmann::json{{"segments", std::move(segments)},
                        {"device_traces", std::move(traces)},
                        {"allocator_settings", std::move(settings)}}
      .dump();
}

void record_memory_history(bool enabled, size_t max_entries) {
  detail::Registry& r = detail::registry();
  detail::size_registry(r);
  std::lock_guard lock(r.mutex);
  // The other modes refuse, as PyTorch's do, before anything changes.
  const std::string_view mode = detail::mode_name(r);
  EMBER_CHECK(mode == "native", Error, mode == "pluggable" ? "CUDAPluggableAllocator" : "cudaMallocAsync",
              " does not yet support recordHistory. If you need it, please file an issue describing your use case.");
  r.history_enabled = enabled;
  r.history_max_entries = max_entries;
  for (detail::DeviceMemoryAllocator* allocator : detail::existing_allocators())
    if (allocator) allocator->record_history(enabled, max_entries);
}

std::pair<size_t, size_t> mem_get_info(int device) { return detail::backend().mem_get_info(detail::resolve(device)); }

void set_per_process_memory_fraction(double fraction, int device) { cache_of(device).set_memory_fraction(fraction); }

std::map<std::string, int64_t> host_memory_stats() { return detail::pinned().cache().stats(); }

PluggableAllocator::PluggableAllocator(MallocFn malloc_fn, FreeFn free_fn) : functions_(std::make_shared<Functions>()) {
  EMBER_CHECK(malloc_fn && free_fn, ValueError, "PluggableAllocator needs both a malloc and a free function");
  functions_->malloc_fn = std::move(malloc_fn);
  functions_->free_fn = std::move(free_fn);
}

void PluggableAllocator::set_reset_fn(std::function<void()> reset_fn) { functions_->reset_fn = std::move(reset_fn); }

void PluggableAllocator::set_memory_fraction_fn(std::function<void(double, int)> memory_fraction_fn) {
  functions_->memory_fraction_fn = std::move(memory_fraction_fn);
}

void change_current_allocator(const PluggableAllocator& allocator) {
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mutex);
  EMBER_CHECK(!r.initialized, Error, "Can't swap an already initialized allocator");
  r.pluggable = allocator.functions();
}

namespace memory {

void set_allocator_settings(const std::string& settings) {
  detail::Registry& r = detail::registry();
  detail::size_registry(r);
  // Under the registry's mutex: a device allocator made meanwhile starts from the new settings.
  std::lock_guard lock(r.mutex);
  const detail::AllocatorConfig config = detail::update_alloc_config(settings);
  for (detail::DeviceMemoryAllocator* allocator : detail::existing_allocators())
    if (allocator) allocator->apply_settings(config);
  detail::pinned().cache().set_register_options(config.pinned_use_host_register, config.pinned_num_register_threads);
}

std::string get_allocator_settings() { return detail::last_allocator_settings(); }

}  // namespace memory

std::string get_allocator_backend() {
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mutex);
  return detail::mode_name(r);
}

}  // namespace ember::cuda
