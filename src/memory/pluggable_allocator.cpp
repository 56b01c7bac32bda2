// A user's PluggableAllocator as a device's allocator (Note [Allocator modes] in
// memory/device_allocator.h), as PyTorch's CUDAPluggableAllocator: each allocation calls
// the user's malloc with the device's current stream and remembers size, device and
// stream for the free; the memory API's statistics and snapshots raise PyTorch's errors.
//
// Note [Pluggable frees wait for the device]
// The caching allocator never hands memory back while queued work may still use it; a
// user's free would, if called as soon as the host drops a tensor: `y = x * 3 + 1` drops
// `x * 3` while `+ 1` is still queued. cudaFree waits for the device, so PyTorch's users'
// frees (cudaFree, mostly) are safe there; a free of heap memory on an emulated device, or
// one that caches, is not. So ember gives every user's free cudaFree's guarantee itself: it
// synchronizes the device first. A device that failed (a sticky error) is drained all the
// same before the error is raised, so the free still runs, after a warning.
#include <cstdio>
#include <exception>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "memory/device_allocator.h"
#include "runtime/backend.h"

namespace ember::detail {
namespace {

[[noreturn]] void unsupported(std::string_view what) {
  fail<Error>("CUDAPluggableAllocator does not yet support ", what,
              ". If you need it, please file an issue describing your use case.");
}

class PluggableDeviceAllocator final : public DeviceMemoryAllocator {
 public:
  PluggableDeviceAllocator(const cuda::PluggableAllocator::Functions& functions, int device)
      : functions_(functions), device_(device) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    cuda::Stream stream = cuda::current_stream(device_);
    void* ptr = functions_.malloc_fn(nbytes, device_, stream);
    EMBER_CHECK(ptr != nullptr, OutOfMemoryError, "CUDA out of memory. The pluggable allocator returned no memory for ",
                nbytes, " bytes on device ", device_);
    std::lock_guard lock(mutex_);
    allocations_.insert_or_assign(ptr, Allocation{nbytes, std::move(stream)});
    return ptr;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::unique_lock lock(mutex_);
    auto it = allocations_.find(ptr);
    EMBER_ASSERT(it != allocations_.end());  // "Trying to free a pointer not allocated here"
    Allocation allocation = std::move(it->second);
    allocations_.erase(it);
    lock.unlock();
    // Note [Pluggable frees wait for the device]
    try {
      undecorated_backend().synchronize_device(device_);
    } catch (const std::exception& e) {
      report_failed_free(allocation.size, "synchronize before the free", e.what());
    }
    // A free runs in destructors; a user's exception is reported, not let out.
    try {
      functions_.free_fn(ptr, allocation.size, device_, std::move(allocation.stream));
    } catch (const std::exception& e) {
      report_failed_free(allocation.size, "free", e.what());
    } catch (...) {
      report_failed_free(allocation.size, "free", "an exception that is not a std::exception");
    }
  }

  const char* backend_name() const noexcept override { return "pluggable"; }
  void empty_cache() override {
    if (functions_.reset_fn) functions_.reset_fn();
  }
  void set_memory_fraction(double fraction) override {
    if (functions_.memory_fraction_fn) functions_.memory_fraction_fn(fraction, device_);
  }
  DeviceStats stats() const override { unsupported("getDeviceStats"); }
  void reset_peak_stats() override { unsupported("resetPeakStats"); }
  void reset_accumulated_stats() override { unsupported("resetAccumulatedStats"); }
  void record_history(bool, size_t) override { unsupported("recordHistory"); }
  nlohmann::json segments_json() const override { unsupported("snapshot"); }
  nlohmann::json trace_json() const override { unsupported("snapshot"); }

 private:
  void report_failed_free(size_t size, const char* step, const char* what) const noexcept {
    std::fprintf(stderr, "ember: warning: the pluggable allocator's %s of %zu bytes on device %d threw: %s\n", step,
                 size, device_, what);
  }
  struct Allocation {
    size_t size;
    cuda::Stream stream;
  };
  const cuda::PluggableAllocator::Functions functions_;
  const int device_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> allocations_;
};

}  // namespace

std::unique_ptr<DeviceMemoryAllocator> make_pluggable_allocator(const cuda::PluggableAllocator::Functions& functions,
                                                                int device) {
  return std::make_unique<PluggableDeviceAllocator>(functions, device);
}

}  // namespace ember::detail
