// The PYTORCH_CUDA_ALLOC_CONF parser's fuzz target (issue 34): parse_alloc_conf on mutated
// settings strings. Every outcome must be a configuration that keeps the parser's
// invariants (the values the allocator relies on) or an ember::ValueError; a crash (which
// the ASan+UBSan build turns every memory or undefined-behaviour error into) or any other
// exception type fails.
//
// LLVMFuzzerTestOneInput is the libFuzzer entry point. Without libFuzzer (GCC builds, where
// CI runs it), main() drives it with a seeded, deterministic mutation loop over valid
// settings, as fuzz_checkpoint does:
//   fuzz_alloc_conf [--seed S] [--iterations N] [--seconds T]   the loop (T only caps it)
//   fuzz_alloc_conf FILE...                                     replays inputs
// A failure prints the input (escaped) before aborting.
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "ember/errors.h"
#include "fuzz_driver.h"
#include "memory/alloc_conf.h"

namespace {

uint64_t accepted_count = 0;  // inputs the parser accepted, for the summary

std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

[[noreturn]] void fail(std::string_view input, const std::string& what) {
  std::cerr << "fuzz_alloc_conf: FAILED: " << what << "\n  input: \"" << escaped(input) << "\"\n";
  std::abort();
}

// What the caching allocator assumes of an accepted configuration.
void check_invariants(std::string_view input, const ember::detail::AllocatorConfig& config) {
  constexpr size_t kLargeBuffer = size_t{20} << 20;
  if (config.max_split_size != std::numeric_limits<size_t>::max() &&
      (config.max_split_size < kLargeBuffer ||
       config.max_split_size > static_cast<size_t>(std::numeric_limits<int64_t>::max())))
    fail(input, "max_split_size out of range: " + std::to_string(config.max_split_size));
  if (config.max_non_split_rounding_size < kLargeBuffer)
    fail(input, "max_non_split_rounding_size below 20 MiB: " + std::to_string(config.max_non_split_rounding_size));
  const double gc = config.garbage_collection_threshold;
  if (!(gc == 0.0 || (gc > 0.0 && gc < 1.0))) fail(input, "garbage_collection_threshold " + std::to_string(gc));
  for (size_t divisions : config.roundup_power2_divisions)
    if (divisions != 0 && !std::has_single_bit(divisions)) fail(input, "divisions " + std::to_string(divisions));
  const size_t threads = config.pinned_num_register_threads;
  if (!std::has_single_bit(threads) || threads > 128) fail(input, "register threads " + std::to_string(threads));
  // Rounding a request of any size must stay in range: divisions_for reads the table.
  for (size_t size : {size_t{1}, size_t{1} << 20, size_t{3} << 30, std::numeric_limits<size_t>::max()})
    (void)config.divisions_for(size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    const ember::detail::AllocatorConfig config = ember::detail::parse_alloc_conf(input);
    check_invariants(input, config);
    ++accepted_count;
  } catch (const ember::ValueError&) {
    // refused, as it may be
  } catch (const std::exception& err) {
    fail(input, std::string("threw ") + typeid(err).name() + ": " + std::string(err.what()).substr(0, 300));
  } catch (...) {
    fail(input, "threw a non-std exception");
  }
  return 0;
}

#ifndef EMBER_LIBFUZZER
namespace {

const char* const kSeeds[] = {
    "max_split_size_mb:128,garbage_collection_threshold:0.6,expandable_segments:True",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:4,max_non_split_rounding_mb:100",
    "backend:cudaMallocAsync",
    "pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
    "release_lock_on_cudamalloc:True,max_split_size_mb:40,",
    "expandable_segments:False, backend:native",
};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string next() {
    std::string s = kSeeds[below(std::size(kSeeds))];
    for (size_t n = 1 + below(5); n > 0; --n) mutate(s);
    return s;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void mutate(std::string& s) {
    static const char* const kPieces[] = {",",
                                          ",,",
                                          ":",
                                          "::",
                                          "[",
                                          "]",
                                          ">",
                                          ">:",
                                          " ",
                                          "\t",
                                          "\0",
                                          "\xff",
                                          "True",
                                          "False",
                                          "true",
                                          "1",
                                          "max_split_size_mb",
                                          "max_non_split_rounding_mb",
                                          "roundup_power2_divisions",
                                          "garbage_collection_threshold",
                                          "expandable_segments",
                                          "release_lock_on_cudamalloc",
                                          "backend",
                                          "pinned_num_register_threads",
                                          "pinned_use_cuda_host_register",
                                          "cudaMallocAsync",
                                          "native",
                                          "[1:2,",
                                          "[>:0]"};
    static const char* const kNumbers[] = {"0",
                                           "1",
                                           "2",
                                           "3",
                                           "20",
                                           "21",
                                           "-1",
                                           "0.5",
                                           "1.0",
                                           "1e-300",
                                           "nan",
                                           "inf",
                                           "4294967296",
                                           "8796093022207",
                                           "8796093022208",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "99999999999999999999999999"};
    const size_t at = below(s.size() + 1);
    switch (below(7)) {
      case 0:
        if (!s.empty()) s[at % s.size()] = static_cast<char>(below(256));
        break;
      case 1: s.erase(at, 1 + below(12)); break;
      case 2: s.insert(at, s.substr(below(s.size() + 1), 1 + below(32))); break;
      case 3: {
        const char* piece = kPieces[below(std::size(kPieces))];
        s.insert(at, piece[0] == '\0' ? std::string(1, '\0') : std::string(piece));
        break;
      }
      case 4: s.insert(at, kNumbers[below(std::size(kNumbers))]); break;
      case 5: {  // replace a run of digits with another number
        const size_t digit = s.find_first_of("0123456789", at);
        if (digit == std::string::npos) break;
        const size_t end = s.find_first_not_of("0123456789.", digit);
        s.replace(digit, (end == std::string::npos ? s.size() : end) - digit, kNumbers[below(std::size(kNumbers))]);
        break;
      }
      case 6: s.resize(at); break;
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  return fuzz::run(
      "fuzz_alloc_conf", argc, argv,
      [](uint64_t seed) { return [mutator = Mutator(seed)](uint64_t) mutable { return mutator.next(); }; },
      [] { return std::to_string(accepted_count) + " accepted, the others refused"; });
}
#endif
