// ForkRng: draws in a scope leave the generators as they were (torch.random.fork_rng).
#pragma once

#include <cstdint>
#include <map>

namespace ember::detail {

/// Saves every device's generator (seed and counter offset) and restores it on exit, so
/// the random numbers drawn inside the scope do not shift those drawn after it. As with
/// PyTorch's fork_rng, draws made meanwhile by other threads are rewound too.
class ForkRng {
 public:
  ForkRng();
  ~ForkRng();
  ForkRng(const ForkRng&) = delete;
  ForkRng& operator=(const ForkRng&) = delete;

 private:
  uint64_t seed_;
  std::map<int, uint64_t> offsets_;
};

}  // namespace ember::detail
