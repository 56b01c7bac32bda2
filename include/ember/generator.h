// Random number generators: torch.Generator, the default generator of each device, and the
// seeding and state functions of torch and torch.cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ember/device.h"

namespace ember {

class Tensor;

namespace detail {
struct GeneratorImpl;
}

/// A random number generator on one device, as torch.Generator: a Philox stream given by a
/// seed and a counter offset, so a seed gives the same numbers on every backend. Copies share
/// one state, as LibTorch's Generator handles do. Passing a generator to a random op draws
/// from it and never moves the device's default generator. A generator may be used by
/// several threads; each draw reserves its own counters.
class Generator {
 public:
  /// A new generator on `device` (cpu by default) seeded with PyTorch's default seed,
  /// 67280421310721, as a fresh torch.Generator is.
  explicit Generator(Device device = Device(DeviceType::CPU));

  Device device() const;
  /// Seeds it and restarts its stream; returns *this (torch.Generator.manual_seed).
  Generator& manual_seed(uint64_t seed);
  /// Seeds it from a non-deterministic source and returns that seed.
  uint64_t seed();
  /// The seed it was last seeded with (torch.Generator.initial_seed).
  uint64_t initial_seed() const;
  /// Its state as a uint8 cpu tensor of 16 bytes (seed, then counter offset, little-endian
  /// uint64s: the layout of PyTorch's CUDA generator state; ember's cpu generator is Philox
  /// too, so its state has the same layout, not PyTorch's mt19937 one).
  Tensor get_state() const;
  /// Restores a state from get_state(). TypeError unless a uint8 cpu tensor; ValueError for
  /// the wrong size or an offset that is not a multiple of 4. The generator is unchanged on error.
  void set_state(const Tensor& state);
  /// A new handle on this generator's current state, shared (torch.Generator.graphsafe_get_state):
  /// Note [Graph-safe generator states] in src/ops/graph_rng.h.
  Generator graphsafe_get_state() const;
  /// Makes this generator draw from `state`'s state, shared (torch.Generator.graphsafe_set_state).
  void graphsafe_set_state(const Generator& state);

  /// Whether both handles are the same generator.
  bool operator==(const Generator& other) const noexcept { return impl_ == other.impl_; }
  bool operator!=(const Generator& other) const noexcept { return impl_ != other.impl_; }

  const std::shared_ptr<detail::GeneratorImpl>& impl() const noexcept { return impl_; }
  explicit Generator(std::shared_ptr<detail::GeneratorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<detail::GeneratorImpl> impl_;
};

/// The default generator of `device` (torch.default_generator for the cpu,
/// torch.cuda.default_generators[i]): what random ops draw from when given no generator.
/// "cuda" without an index is the current device. DeviceError for a device that does not exist.
Generator& default_generator(Device device);

/// The cpu default generator's state (torch.get_rng_state) and its restore (torch.set_rng_state).
Tensor get_rng_state();
void set_rng_state(const Tensor& state);
/// The seed the cpu default generator was last seeded with (torch.initial_seed).
uint64_t initial_seed();
/// Seeds the cpu and every cuda device's default generator from a non-deterministic source
/// (torch.seed); returns that seed.
uint64_t seed();

namespace cuda {
/// Seeds the current device's default generator (torch.cuda.manual_seed).
void manual_seed(uint64_t seed);
/// Seeds every cuda device's default generator (torch.cuda.manual_seed_all).
void manual_seed_all(uint64_t seed);
/// Seeds the current device's default generator non-deterministically (torch.cuda.seed).
void seed();
/// Seeds every cuda device's default generator with one non-deterministic seed.
void seed_all();
/// The current device's default generator's last seed (torch.cuda.initial_seed).
uint64_t initial_seed();
/// A device's default generator state; device -1 is the current device.
Tensor get_rng_state(int device = -1);
void set_rng_state(const Tensor& state, int device = -1);
/// Every device's, in device order.
std::vector<Tensor> get_rng_state_all();
void set_rng_state_all(const std::vector<Tensor>& states);
}  // namespace cuda

}  // namespace ember
