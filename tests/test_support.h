// Shared test set-up: the conformance tests run on whatever cuda backend this machine
// has: the driver backend on a GPU machine, else 4 emulated devices.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "ember/ember.h"

namespace ember::testing {

/// The emulated devices ensure_cuda() turns on when there is no GPU.
constexpr int kEmulatedDevices = 4;
constexpr size_t kEmulatedBytes = size_t{1} << 30;

/// True once ensure_cuda() has turned on its own emulated devices (kEmulatedDevices of
/// the bytes it was given), as opposed to a GPU or EMBER_EMULATED_DEVICES.
inline bool& emulating_defaults() {
  static bool emulating = false;
  return emulating;
}

/// Selects the cuda backend for this process (once).
inline void ensure_cuda(size_t emulated_bytes = kEmulatedBytes) {
  static bool done = [&] {
    if (!std::getenv("EMBER_EMULATED_DEVICES") && !cuda::driver_is_available()) {
      // The default emulation is a fixed configuration: a stray CUDA_VISIBLE_DEVICES
      // (meant for real GPUs) must not hide some of its devices.
      unsetenv("CUDA_VISIBLE_DEVICES");
      cuda::emulate(kEmulatedDevices, emulated_bytes);
      emulating_defaults() = true;
    }
    return true;
  }();
  (void)done;
}

/// Runs `f` and returns the message of the `E` it throws, or "<no error>".
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& err) {
    return err.what();
  }
  return "<no error>";
}

/// Base of the suites that run each test on the cpu and on cuda devices: the parameter is
/// a device string ("cpu", "cuda:0", ...); a cuda device the machine lacks skips the test.
/// A fixture that overrides SetUp() calls OnDevice::SetUp() first and returns if
/// IsSkipped().
class OnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "cpu") ensure_cuda();
    dev_ = Device(GetParam());
    if (dev_.is_cuda() && dev_.index() >= cuda::device_count()) GTEST_SKIP() << "needs device " << dev_;
  }
  Device dev_{kCPU};
};

/// The test-name suffix of an OnDevice parameter: "cpu", "cuda0", "cuda1", ...
inline std::string device_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  name.erase(std::remove(name.begin(), name.end(), ':'), name.end());
  return name;
}

/// Why a request of many TiB would not fail with OutOfMemoryError here ("" when it does): the
/// sanitizers' allocators abort on it instead, and for host memory a kernel that overcommits
/// every allocation (vm.overcommit_memory 1) grants it. Emulated devices have their own limit.
inline std::string huge_allocation_skip_reason(bool host_memory = true) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return "the sanitizers' allocators abort on a multi-TiB request instead of failing it";
#else
  std::ifstream mode_file("/proc/sys/vm/overcommit_memory");
  int mode = 1;
  mode_file >> mode;
  return host_memory && mode == 1 ? "the kernel overcommits every allocation" : "";
#endif
}

/// Skips the test where a multi-TiB request would not fail (huge_allocation_skip_reason).
#define EMBER_SKIP_UNLESS_HUGE_ALLOCATIONS_FAIL(...)                                                        \
  do {                                                                                                      \
    if (const std::string why = ::ember::testing::huge_allocation_skip_reason(__VA_ARGS__); !why.empty()) { \
      GTEST_SKIP() << why;                                                                                  \
    }                                                                                                       \
  } while (false)

/// Instantiates an OnDevice suite on the given device strings.
#define EMBER_ON_DEVICES(Suite, ...) \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::Values(__VA_ARGS__), ::ember::testing::device_test_name)

/// Skips the test unless at least `n` cuda devices exist.
#define EMBER_REQUIRE_DEVICES(n)                                                            \
  do {                                                                                      \
    ::ember::testing::ensure_cuda();                                                        \
    if (::ember::cuda::device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " devices"; \
  } while (false)

/// Skips the test unless it runs on ensure_cuda()'s default emulated devices: for checks
/// of emulated-only behaviour (exact device count, names, memory, host functions).
#define EMBER_REQUIRE_EMULATED()                                                                           \
  do {                                                                                                     \
    ::ember::testing::ensure_cuda();                                                                       \
    if (!::ember::testing::emulating_defaults())                                                           \
      GTEST_SKIP() << "needs the default emulated devices, not '" << ::ember::cuda::backend_name() << "'"; \
  } while (false)

/// Expects `stmt` to throw `E` whose message contains `text`.
#define EXPECT_THROW_MSG(stmt, E, text)                                               \
  do {                                                                                \
    try {                                                                             \
      stmt;                                                                           \
      ADD_FAILURE() << "expected " #E " from " #stmt;                                 \
    } catch (const E& err) {                                                          \
      EXPECT_NE(std::string(err.what()).find(text), std::string::npos) << err.what(); \
    }                                                                                 \
  } while (false)

}  // namespace ember::testing
