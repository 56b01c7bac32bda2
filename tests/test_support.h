// Shared test set-up: the conformance tests run on whatever cuda backend this machine
// has: the driver backend on a GPU machine, else 4 emulated devices.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/ember.h"

namespace ember::testing {

/// Selects the cuda backend for this process (once).
inline void ensure_cuda(size_t emulated_bytes = size_t{1} << 30) {
  static bool done = [&] {
    if (!std::getenv("EMBER_EMULATED_DEVICES") && !cuda::driver_is_available()) cuda::emulate(4, emulated_bytes);
    return true;
  }();
  (void)done;
}

/// Skips the test unless at least `n` cuda devices exist.
#define EMBER_REQUIRE_DEVICES(n)                                                           \
  do {                                                                                     \
    ::ember::testing::ensure_cuda();                                                       \
    if (::ember::cuda::device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " devices"; \
  } while (false)

/// Expects `stmt` to throw `E` whose message contains `text`.
#define EXPECT_THROW_MSG(stmt, E, text)                                                     \
  do {                                                                                      \
    try {                                                                                   \
      stmt;                                                                                 \
      ADD_FAILURE() << "expected " #E " from " #stmt;                                       \
    } catch (const E& err) {                                                                \
      EXPECT_NE(std::string(err.what()).find(text), std::string::npos) << err.what();       \
    }                                                                                       \
  } while (false)

}  // namespace ember::testing
