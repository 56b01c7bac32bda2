// FakeBackend: a Backend with capacity-limited device heaps and hand-driven streams,
// for testing the memory layer without the runtime.
//
// Device memory is address space only (never dereferenced by the allocators), so
// tests can model gigabyte devices cheaply. Work "queued" on a stream (sleep, copy,
// launch) stays pending until synchronize() on the stream, an event or the device, or a
// raw_free (which synchronizes, as cudaFree does). Events capture a stream's queue
// position and complete when the stream has finished up to there.
// Shared by tests/test_caching_allocator*.cpp, tests/test_pinned_allocator*.cpp and
// bench/bench_allocator.cpp.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "runtime/backend.h"

namespace ember::testing {

class FakeStream final : public detail::BackendStream {
 public:
  explicit FakeStream(int device) : device(device) {}
  int device;
  uint64_t queued = 0;     // units of work enqueued
  uint64_t completed = 0;  // units finished
};

class FakeEvent final : public detail::BackendEvent {
 public:
  FakeStream* stream = nullptr;
  uint64_t target = 0;
};

class FakeBackend final : public detail::Backend {
 public:
  FakeBackend(int devices, size_t bytes_per_device, size_t pinned_limit = size_t{1} << 40)
      : capacity_(bytes_per_device), pinned_limit_(pinned_limit), used_(devices, 0), next_address_(devices) {
    for (int d = 0; d < devices; ++d) {
      next_address_[d] = (static_cast<uintptr_t>(d) + 1) << 44;  // disjoint, 512-aligned ranges per device
      default_streams_.push_back(std::make_unique<FakeStream>(d));
    }
  }
  ~FakeBackend() override {
    for (auto& [ptr, size] : pinned_) std::free(ptr);
  }

  const char* name() const noexcept override { return "fake"; }
  int device_count() const override { return static_cast<int>(used_.size()); }
  cuda::DeviceProperties properties(int device) const override { return {"Fake GPU", capacity_, 9, 0, 1}; }
  void set_device(int) override {}

  void* raw_alloc(int device, size_t bytes) override {
    if (on_raw_alloc) on_raw_alloc();  // outside the backend's mutex: it may call back in
    std::lock_guard lock(mutex_);
    if (bytes > capacity_ - used_[device]) return nullptr;
    uintptr_t address = next_address_[device];
    next_address_[device] += (bytes + 511) / 512 * 512;
    used_[device] += bytes;
    allocations_[address] = bytes;
    ++raw_allocs;
    return reinterpret_cast<void*>(address);
  }
  void raw_free(int device, void* ptr) override {
    std::lock_guard lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end()) throw std::logic_error("FakeBackend::raw_free of an unknown pointer");
    used_[device] -= it->second;
    allocations_.erase(it);
    ++raw_frees;
    complete_device_locked(device);  // cudaFree synchronizes the device
  }
  std::pair<size_t, size_t> mem_get_info(int device) override {
    std::lock_guard lock(mutex_);
    return {capacity_ - used_[device], capacity_};
  }
  void* pinned_alloc(size_t bytes) override {
    std::lock_guard lock(mutex_);
    if (bytes > pinned_limit_ - pinned_used_) return nullptr;
    void* ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (ptr == nullptr) return nullptr;
    pinned_[ptr] = bytes;
    pinned_used_ += bytes;
    return ptr;
  }
  void pinned_free(void* ptr) override {
    std::lock_guard lock(mutex_);
    auto it = pinned_.find(ptr);
    if (it == pinned_.end()) throw std::logic_error("FakeBackend::pinned_free of an unknown pointer");
    pinned_used_ -= it->second;
    std::free(ptr);
    pinned_.erase(it);
  }

  detail::BackendStream* default_stream(int device) override { return default_streams_[device].get(); }
  detail::BackendStream* create_stream(int device, int) override {
    std::lock_guard lock(mutex_);
    streams_.push_back(std::make_unique<FakeStream>(device));
    return streams_.back().get();
  }
  void destroy_stream(detail::BackendStream*) noexcept override {}  // owned until the backend goes
  bool query(detail::BackendStream* stream) override {
    std::lock_guard lock(mutex_);
    auto* s = static_cast<FakeStream*>(stream);
    return s->completed == s->queued;
  }
  void synchronize(detail::BackendStream* stream) override {
    std::lock_guard lock(mutex_);
    auto* s = static_cast<FakeStream*>(stream);
    s->completed = s->queued;
  }
  void synchronize_device(int device) override {
    std::lock_guard lock(mutex_);
    complete_device_locked(device);
  }
  std::pair<int, int> priority_range() const override { return {0, -1}; }

  detail::BackendEvent* create_event(int, bool) override {
    std::lock_guard lock(mutex_);
    ++live_events;
    return new FakeEvent;
  }
  void destroy_event(detail::BackendEvent* event) noexcept override {
    std::lock_guard lock(mutex_);
    --live_events;
    delete static_cast<FakeEvent*>(event);
  }
  void record(detail::BackendEvent* event, detail::BackendStream* stream) override {
    std::lock_guard lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    e->stream = static_cast<FakeStream*>(stream);
    e->target = e->stream->queued;
    ++records;
  }
  void wait(detail::BackendStream*, detail::BackendEvent*) override {}
  bool query(detail::BackendEvent* event) override {
    std::lock_guard lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    return e->stream == nullptr || e->stream->completed >= e->target;
  }
  void synchronize(detail::BackendEvent* event) override {
    std::lock_guard lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    if (e->stream) e->stream->completed = std::max(e->stream->completed, e->target);
  }
  float elapsed_ms(detail::BackendEvent*, detail::BackendEvent*) override { return 0.0f; }

  void launch(detail::BackendStream* stream, const detail::KernelCall&) override { enqueue(stream); }
  void copy(void*, const void*, size_t, detail::CopyKind, bool, detail::BackendStream* stream) override {
    enqueue(stream);
  }
  void sleep(detail::BackendStream* stream, std::chrono::nanoseconds) override { enqueue(stream); }
  bool can_access_peer(int, int) override { return true; }
  void check_error(int) override {}
  void reset(int device) override { synchronize_device(device); }

  /// Called at the start of every raw_alloc, when set (tests of what may run meanwhile).
  std::function<void()> on_raw_alloc;
  // Counters for tests (read after the threads that use the backend have joined).
  int64_t raw_allocs = 0;
  int64_t raw_frees = 0;
  int64_t live_events = 0;
  int64_t records = 0;

 private:
  void enqueue(detail::BackendStream* stream) {
    std::lock_guard lock(mutex_);
    ++static_cast<FakeStream*>(stream)->queued;
  }
  void complete_device_locked(int device) {
    for (auto* list : {&default_streams_, &streams_})
      for (auto& s : *list)
        if (s->device == device) s->completed = s->queued;
  }

  std::mutex mutex_;
  size_t capacity_;
  size_t pinned_limit_;
  size_t pinned_used_ = 0;
  std::vector<size_t> used_;
  std::vector<uintptr_t> next_address_;
  std::map<uintptr_t, size_t> allocations_;
  std::map<void*, size_t> pinned_;
  std::vector<std::unique_ptr<FakeStream>> default_streams_;
  std::vector<std::unique_ptr<FakeStream>> streams_;
};

}  // namespace ember::testing
