// The fixture of the stream sanitizer's public-API tests: enables it (Error mode) for
// each test and restores the process's setting afterwards (the suite may run with
// EMBER_CUDA_SANITIZER set).
#pragma once

#include <gtest/gtest.h>

#include <sstream>

#include "ember/ember.h"
#include "runtime/backend.h"
#include "test_support.h"

namespace ember::testing {

namespace csan = cuda::sanitizer;

/// Waits for the device without the sanitizer seeing it: the race it reports next is
/// then only a logical one, and the test does not really race (TSan stays quiet).
inline void drain_unseen(int device = 0) { detail::undecorated_backend().synchronize_device(device); }

inline std::string hex(const void* p) {
  std::ostringstream out;
  out << "0x" << std::hex << reinterpret_cast<uintptr_t>(p);
  return out.str();
}

class Sanitizer : public ::testing::Test {
 protected:
  void SetUp() override {
    ensure_cuda();
    (void)cuda::device_count();  // selects the backend, which reads EMBER_CUDA_SANITIZER
    was_enabled_ = csan::is_enabled();
    was_mode_ = csan::mode();
    csan::enable();
  }
  void TearDown() override {
    cuda::synchronize();
    if (was_enabled_) {
      csan::enable(was_mode_);
    } else {
      csan::disable();
    }
  }
  Tensor cuda_normal(const IntList& shape) { return empty(shape, TensorOptions().device(kCUDA)).normal_(0.0, 1.0); }

  bool was_enabled_ = false;
  csan::Mode was_mode_ = csan::Mode::Error;
};

}  // namespace ember::testing
