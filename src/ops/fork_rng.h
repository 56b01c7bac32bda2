// ForkRng: draws in a scope leave the generators as they were (torch.random.fork_rng).
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "ember/device.h"

namespace ember::detail {

/// For the calling thread, while in scope: random draws (and manual_seed) use a copy of
/// every device's generator (seed and counter offsets) taken on entry, so they do not
/// shift the numbers drawn after the scope. Other threads keep drawing from the process's
/// generators meanwhile, unaffected. Scopes nest.
class ForkRng {
 public:
  ForkRng();
  ~ForkRng();
  ForkRng(const ForkRng&) = delete;
  ForkRng& operator=(const ForkRng&) = delete;

  uint64_t seed;
  std::map<int, uint64_t> offsets;  // device index (-1: cpu) -> next counter

 private:
  ForkRng* outer_;
};

/// The seed and the first Philox counter of `count` counters reserved on `device`'s
/// generator (the calling thread's ForkRng scope, if any): random ops outside random.cpp
/// (multinomial) draw from the same streams as normal_ and uniform_.
std::pair<uint64_t, uint64_t> reserve_random(Device device, uint64_t count);

}  // namespace ember::detail
