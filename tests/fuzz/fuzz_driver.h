// The loop a fuzz target runs when it is not a libFuzzer binary (tests/fuzz/CMakeLists.txt):
//   TARGET [--seed S] [--iterations N] [--seconds T]   N inputs from a seeded generator (T only
//                                                      caps a slow machine), or
//   TARGET FILE...                                     each file once (a libFuzzer crash input)
// Each input goes to the target's LLVMFuzzerTestOneInput, which aborts on a failure.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fuzz {

inline void test_one(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

/// Runs the loop. `make_next(seed)` gives the generator: a callable returning the next input
/// (called with the input's index); `summary()` what the target counted, for the closing line.
template <typename MakeNext, typename Summary>
int run(const char* name, int argc, char** argv, MakeNext&& make_next, Summary&& summary) {
  uint64_t seed = 1, iterations = 10000;
  double seconds = 0;
  std::vector<std::string> replay;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (arg == "--iterations" && i + 1 < argc) iterations = std::stoull(argv[++i]);
    else if (arg == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else replay.push_back(arg);
  }
  if (!replay.empty()) {
    for (const std::string& path : replay) {
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "%s: cannot read %s\n", name, path.c_str());
        return 1;
      }
      test_one(std::string(std::istreambuf_iterator<char>(in), {}));
    }
    std::cout << name << ": replayed " << replay.size() << " inputs\n";
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  auto next = make_next(seed);
  uint64_t done = 0;
  for (; done < iterations; ++done) {
    if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    test_one(next(done));
  }
  std::cout << name << ": seed " << seed << ", " << done << " of " << iterations << " inputs (" << summary()
            << "), no failure\n";
  return 0;
}

}  // namespace fuzz
