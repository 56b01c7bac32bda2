// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// Written once for host and device so a seed gives the same numbers on every backend.
//
// Element i of a random op with (seed, offset) takes output word (offset + i) % 4 of the
// block at counter (offset + i) / 4, keyed by the seed. normal_ uses Box-Muller over
// two uniforms taken from elements 2*i and 2*i+1 of that stream.
#pragma once

#include <cstdint>

#include "ember/half.h"

namespace ember::detail {

struct Philox4 {
  uint32_t v[4];
};

EMBER_HOST_DEVICE inline Philox4 philox4x32(uint64_t counter, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// The 32-bit random word number `index` of the stream keyed by `seed`.
EMBER_HOST_DEVICE inline uint32_t philox_word(uint64_t seed, uint64_t index) {
  return philox4x32(index >> 2, seed).v[index & 3];
}

/// Uniform in [0, 1) with 24 random bits (float) / from two words, 53 bits (double).
EMBER_HOST_DEVICE inline float philox_uniform_float(uint64_t seed, uint64_t index) {
  return static_cast<float>(philox_word(seed, index) >> 8) * (1.0f / 16777216.0f);
}
EMBER_HOST_DEVICE inline double philox_uniform_double(uint64_t seed, uint64_t index) {
  uint64_t hi = philox_word(seed, 2 * index) >> 5, lo = philox_word(seed, 2 * index + 1) >> 6;
  return static_cast<double>(hi * 67108864ull + lo) * (1.0 / 9007199254740992.0);
}

}  // namespace ember::detail
