// What the store parsers' seeded fuzz tests share: a fixed-seed source of choices and the
// mutations they make to a stream of well-formed requests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>

namespace ember::testing {

/// Choices from a fixed seed, so every run checks the same inputs.
class FuzzRandom {
 public:
  explicit FuzzRandom(uint64_t seed) : rng_(seed) {}
  uint64_t next() { return rng_(); }
  /// A number in [0, n).
  size_t below(size_t n) { return static_cast<size_t>(rng_() % n); }
  /// Up to `max` letters of four, so that keys collide.
  std::string letters(size_t max) {
    std::string s(below(max + 1), '\0');
    for (char& c : s) c = static_cast<char>('a' + below(4));
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

/// Up to three edits at random places: a flipped bit, a random byte, one of `lengths` or
/// `numbers` written over the bytes there (a length as wide as the protocol's), six
/// letters inserted, up to eight bytes erased, or the rest cut off.
template <typename Length, size_t L, size_t N>
void mutate(std::string& stream, FuzzRandom& random, const Length (&lengths)[L], const int64_t (&numbers)[N]) {
  auto write_over = [&](size_t at, const auto& value) {
    stream.replace(at, std::min(sizeof(value), stream.size() - at), reinterpret_cast<const char*>(&value),
                   sizeof(value));
  };
  for (size_t m = 0, n = random.below(4); m < n && !stream.empty(); ++m) {
    size_t at = random.below(stream.size());
    switch (random.below(7)) {
      case 0: stream[at] = static_cast<char>(stream[at] ^ (1 << random.below(8))); break;
      case 1: stream[at] = static_cast<char>(random.next()); break;
      case 2: write_over(at, lengths[random.below(L)]); break;
      case 3: write_over(at, numbers[random.below(N)]); break;
      case 4: stream.insert(at, random.letters(6)); break;
      case 5: stream.erase(at, random.below(8)); break;
      case 6: stream.resize(at); break;
    }
  }
}

}  // namespace ember::testing
