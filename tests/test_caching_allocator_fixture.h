// The caching allocator test fixture: one allocator over a small backend device,
// parameterized by how the backend is made, so the same tests can run over the
// FakeBackend now and over the emulated backend (make_emulated_backend) as well.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/errors.h"
#include "memory/caching_allocator.h"
#include "test_caching_allocator_fake_backend.h"

namespace ember::testing {

inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;

struct BackendMaker {
  std::string name;
  std::function<std::unique_ptr<detail::Backend>(size_t bytes_per_device)> make;
};

inline void PrintTo(const BackendMaker& maker, std::ostream* out) { *out << maker.name; }

inline BackendMaker fake_backend_maker() {
  return {"fake", [](size_t bytes) { return std::make_unique<FakeBackend>(1, bytes); }};
}

/// Device 0 of the emulated backend (an arena of `bytes`, streams on worker threads).
inline BackendMaker emulated_backend_maker() {
  return {"emulated", [](size_t bytes) { return detail::make_emulated_backend(bytes, {0}); }};
}

class CachingAllocatorTest : public ::testing::TestWithParam<BackendMaker> {
 protected:
  void SetUp() override { use(64 * MiB); }
  void TearDown() override { reset(); }

  /// A fresh backend device of `capacity` bytes and an allocator over it.
  void use(size_t capacity, detail::AllocatorConfig config = {}) {
    reset();
    backend_ = GetParam().make(capacity);
    allocator_ = std::make_unique<detail::CachingAllocator>(*backend_, 0, config);
    s0 = {backend_->default_stream(0), 0, 0};
    s1 = new_stream(1);
  }
  detail::StreamRef new_stream(uint64_t id) {
    detail::BackendStream* native = backend_->create_stream(0, 0);
    streams_.push_back(native);
    return {native, id, 0};
  }
  int64_t stat(const std::string& key) const { return allocator_->stats().to_map().at(key); }
  /// Queues work on `stream` that stays pending until finish(stream) (the fake backend), or
  /// for `duration` (a real or emulated one: long enough for the checks that follow).
  void keep_busy(detail::StreamRef stream, std::chrono::nanoseconds duration = std::chrono::seconds(1)) {
    backend_->sleep(stream.native, duration);
  }
  void finish(detail::StreamRef stream) { backend_->synchronize(stream.native); }
  detail::CachingAllocator& alloc() { return *allocator_; }

  std::unique_ptr<detail::Backend> backend_;
  std::unique_ptr<detail::CachingAllocator> allocator_;
  detail::StreamRef s0, s1;

 private:
  void reset() {
    allocator_.reset();
    if (backend_)
      for (detail::BackendStream* stream : streams_) backend_->destroy_stream(stream);
    streams_.clear();
    backend_.reset();
  }
  std::vector<detail::BackendStream*> streams_;
};

}  // namespace ember::testing
