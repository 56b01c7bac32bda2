// ForkRng: draws in a scope leave the generators as they were (torch.random.fork_rng).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "ember/device.h"
#include "ember/generator.h"

namespace ember::detail {

/// For the calling thread, while in scope: random draws from the default generators (and
/// manual_seed) use a copy of every device's default generator (seed and counter offset)
/// taken on entry, so they do not shift the numbers drawn after the scope. Other threads keep
/// drawing from the process's generators meanwhile, unaffected; a generator passed to an op is
/// drawn from as outside the scope. Scopes nest.
class ForkRng {
 public:
  ForkRng();
  ~ForkRng();
  ForkRng(const ForkRng&) = delete;
  ForkRng& operator=(const ForkRng&) = delete;

  struct State {
    uint64_t seed;
    uint64_t offset;  // the next counter
  };
  std::map<int, State> states;   // device index (-1: cpu) -> its default generator's copy
  uint64_t cpu_seed, cuda_seed;  // the seeds of default generators not made yet

 private:
  ForkRng* outer_;
};

/// The seed and the first Philox counter of `count` counters reserved on `generator`, or
/// without one on `device`'s default generator (the calling thread's ForkRng scope, if any):
/// random ops outside random.cpp (multinomial) draw from the same streams as normal_ and
/// uniform_. DeviceError when the generator is of another device type than `device`.
std::pair<uint64_t, uint64_t> reserve_random(Device device, uint64_t count,
                                             const std::optional<Generator>& generator = std::nullopt);

}  // namespace ember::detail
