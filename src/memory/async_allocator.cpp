// backend:cudaMallocAsync: a device's allocator over the backend's stream-ordered pool,
// as PyTorch's CUDAMallocAsyncAllocator (Note [Allocator modes] in device_allocator.h).
//
// Note [Stream-ordered frees]
// An allocation belongs to the current stream; its free is queued on that stream, so the
// pool reuses the memory for other streams only after the stream's work so far. A block
// record_stream() marked as used by other streams is freed on a "unifying" stream made
// to wait (through events) for its allocation stream and every recorded stream, as
// PyTorch's free_impl does, so the free is ordered after all of its uses. The stream
// sanitizer hears of each free as of the caching allocator's: the block's next user is
// ordered after the allocation stream and the recorded streams, not after others.
// Statistics are the pool's: reserved and used (allocated = active) bytes, current and
// peak; every other counter stays zero. Snapshots and history raise PyTorch's errors.
//
// Note [Async allocator during capture]
// As PyTorch's CUDAMallocAsyncAllocator, graph capture needs no private pool: an
// allocation on a capturing stream is cudaMallocAsync captured as an allocation node,
// whose memory the graph owns at a fixed address (the driver instantiates graphs with
// cudaGraphInstantiateFlagAutoFreeOnLaunch, so a replay may run while the last one's
// outputs are still held), and its free, inside the capture or after it, is an ordinary
// cudaFreeAsync. Memory allocated outside any capture cannot be freed by a graph, so its
// frees while a capture is open on the device wait until the last capture ends.
// Pool ids are accepted and ignored (every capture shares the device's graph memory).
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/errors.h"
#include "memory/device_allocator.h"
#include "runtime/context.h"
#include "runtime/stream_pool.h"
#include "runtime/stream_state.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail {
namespace {

constexpr size_t kOneExabyte = size_t{1} << 60;

[[noreturn]] void not_meaningful() {
  fail<Error>(
      "Calling snapshot with backend:cudaMallocAsync is not meaningful. (For backend:native, snapshot "
      "returns a detailed summary of all blocks tracked by the allocator, but the cudaMallocAsync "
      "backend does not track individual blocks.)");
}

class AsyncDeviceAllocator final : public DeviceMemoryAllocator {
 public:
  AsyncDeviceAllocator(Backend& backend, int device) : backend_(backend), device_(device) {
    EMBER_CHECK(backend.supports_stream_ordered_allocation(device), DeviceError,
                "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync needs stream-ordered allocation (memory pools), "
                "which cuda:",
                device, " of the ", backend.name(), " backend does not support");
  }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    EMBER_CHECK(nbytes < kOneExabyte, OutOfMemoryError, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    StreamState* stream = current_stream_state(device_);
    std::lock_guard lock(mutex_);
    void* ptr = nullptr;
    if (used_ + nbytes <= limit_) ptr = backend_.stream_alloc(device_, nbytes, stream->native());
    if (ptr == nullptr) {
      const auto [device_free, device_total] = backend_.mem_get_info(device_);
      fail<OutOfMemoryError>("Allocation on device ", device_, " would exceed allowed memory. (out of memory)",
                             "\nCurrently allocated     : ", format_size(used_),
                             "\nRequested               : ", format_size(nbytes),
                             "\nDevice limit            : ", format_size(device_total),
                             "\nFree (according to CUDA): ", format_size(device_free),
                             "\nPyTorch limit (set by user-supplied memory fraction)"
                             "\n                        : ",
                             format_size(limit_));
    }
    used_ += nbytes;
    const bool captured = captures_ > 0 && backend_.capture_status(stream->native()).first != CaptureStatus::None;
    allocations_.insert_or_assign(ptr, Allocation{nbytes, stream->native(), stream->generation(), {}, captured});
    return ptr;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = allocations_.find(ptr);
    EMBER_ASSERT(it != allocations_.end());       // "ptr not found in ptr_info"
    if (captures_ > 0 && !it->second.captured) {  // Note [Async allocator during capture]
      deferred_.push_back(ptr);
      return;
    }
    free_locked(it);
  }

  void begin_allocate_to_pool(cuda::MempoolId /*pool*/, uint64_t /*capture_id*/) override {
    std::lock_guard lock(mutex_);
    ++captures_;
  }

  void end_allocate_to_pool(cuda::MempoolId /*pool*/) noexcept override {
    std::lock_guard lock(mutex_);
    if (--captures_ > 0) return;
    for (void* ptr : deferred_) free_locked(allocations_.find(ptr));
    deferred_.clear();
  }

  void record_stream(void* ptr, StreamState* stream) override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = allocations_.find(ptr);
    EMBER_CHECK(it != allocations_.end(), ValueError, "record_stream: pointer ", ptr,
                " was not allocated by the cudaMallocAsync allocator of cuda:", device_, " or was already freed");
    BackendStream* native = stream->native();
    if (native == it->second.stream) return;  // the allocation stream orders its uses already
    for (const Recorded& use : it->second.recorded)
      if (use.stream == native) return;
    it->second.recorded.push_back({native, stream->device(), stream->generation()});
  }

  const char* backend_name() const noexcept override { return "cudaMallocAsync"; }
  void empty_cache() override { backend_.trim_pool(device_); }

  DeviceStats stats() const override {
    const Backend::PoolUsage pool = backend_.pool_usage(device_);
    DeviceStats stats;
    stats.max_split_size = 0;  // PyTorch leaves it, like every counter not set below, zero
    stats.allocated_bytes[kAggregate].current = stats.active_bytes[kAggregate].current =
        static_cast<int64_t>(pool.used_current);
    stats.allocated_bytes[kAggregate].peak = stats.active_bytes[kAggregate].peak = static_cast<int64_t>(pool.used_high);
    stats.reserved_bytes[kAggregate].current = static_cast<int64_t>(pool.reserved_current);
    stats.reserved_bytes[kAggregate].peak = static_cast<int64_t>(pool.reserved_high);
    return stats;
  }
  void reset_peak_stats() override { backend_.reset_pool_peaks(device_); }
  void reset_accumulated_stats() override {}  // PyTorch: "has no effect" for this backend
  void set_memory_fraction(double fraction) override {
    EMBER_CHECK(fraction >= 0.0 && fraction <= 1.0, ValueError, "Invalid fraction value: ", fraction,
                ". Allowed range: 0~1");
    const size_t total = backend_.mem_get_info(device_).second;
    std::lock_guard lock(mutex_);
    limit_ = static_cast<size_t>(fraction * static_cast<double>(total));
  }
  void record_history(bool, size_t) override {
    fail<Error>(
        "cudaMallocAsync does not yet support recordHistory. If you need it, please file an issue "
        "describing your use case.");
  }
  nlohmann::json segments_json() const override { not_meaningful(); }
  nlohmann::json trace_json() const override { not_meaningful(); }

 private:
  struct Recorded {  // a stream given to record_stream
    BackendStream* stream;
    int device;
    uint64_t generation;  // its device's reset generation when it was made
  };
  struct Allocation {
    size_t size;
    BackendStream* stream;  // the allocation stream
    uint64_t generation;    // the device's reset generation when that stream was made
    std::vector<Recorded> recorded;
    bool captured = false;  // made on a capturing stream: graph memory
  };

  // mutex_ held. A pooled stream of the device, kept for every multi-stream free.
  BackendStream* unifying_stream() {
    if (!unifier_ || unifier_->generation() != device_generation(device_)) unifier_ = pooled_stream(device_, 0);
    return unifier_->native();
  }
  // Future work on `dependent` waits for `dependency`'s work queued so far.
  void order_after(BackendStream* dependency, int dependency_device, BackendStream* dependent) {
    BackendEvent* event = backend_.create_event(dependency_device, false);
    try {
      backend_.record(event, dependency);
      backend_.wait(dependent, event);
    } catch (...) {
      backend_.destroy_event(event);
      throw;
    }
    backend_.destroy_event(event);
  }

  // mutex_ held: frees an allocation on its stream (Note [Stream-ordered frees]).
  void free_locked(std::unordered_map<void*, Allocation>::iterator it) noexcept {
    void* ptr = it->first;
    const Allocation& allocation = it->second;
    if (sanitizer::enabled()) [[unlikely]] {
      // The pool reuses the block only after the free, which is ordered after the
      // allocation stream and the recorded streams (Note [Freed blocks]).
      std::vector<const void*> waited;
      for (const Recorded& use : allocation.recorded) waited.push_back(use.stream);
      sanitizer::on_deallocation(ptr, allocation.size, allocation.stream, waited);
    }
    try {
      // A reset since the allocation drained the device and invalidated its streams
      // (Note [Stream pool]): the free then follows nothing and goes on the default stream.
      BackendStream* stream =
          allocation.generation == device_generation(device_) ? allocation.stream : backend_.default_stream(device_);
      std::vector<std::pair<BackendStream*, int>> waits;
      for (const Recorded& use : allocation.recorded)
        if (use.generation == device_generation(use.device)) waits.emplace_back(use.stream, use.device);
      if (waits.empty()) {
        backend_.stream_free(device_, ptr, stream);
      } else {
        BackendStream* unifier = unifying_stream();
        order_after(stream, device_, unifier);
        for (const auto& [waited, device] : waits) order_after(waited, device, unifier);
        backend_.stream_free(device_, ptr, unifier);
      }
    } catch (...) {
      // A device with a sticky error: the memory goes back with the device's reset.
    }
    used_ -= it->second.size;
    allocations_.erase(it);
  }

  Backend& backend_;
  const int device_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> allocations_;
  size_t used_ = 0;  // bytes handed out, for the memory fraction
  size_t limit_ = std::numeric_limits<size_t>::max();
  int captures_ = 0;             // open captures of this device (begin/end_allocate_to_pool)
  std::vector<void*> deferred_;  // frees waiting for the last capture to end
  std::shared_ptr<StreamState> unifier_;
};

}  // namespace

std::unique_ptr<DeviceMemoryAllocator> make_async_allocator(Backend& backend, int device) {
  return std::make_unique<AsyncDeviceAllocator>(backend, device);
}

}  // namespace ember::detail
