// The generators' side of CUDA graph capture.
//
// Note [Graph-safe Philox]
// A random op captured in a graph must draw new numbers on each replay, so its kernel
// cannot bake in the (seed, offset) of the capture. As PyTorch's CUDA generator: while a
// capture is open, a random op on one of its streams reserves counters relative to the
// capture (the intragraph offset, from 0) of the generator state it draws from, and its
// kernel reads the seed and a base offset from two int64 device tensors the graph keeps
// for that state. replay() first writes each state's current seed and offset into its
// tensors (ordinary fills on the replay stream), then advances the state's offset by the
// capture's whole reservation from it, so a replay draws what the same ops issued eagerly
// at that point would, and the states afterwards are the same. The capture itself does
// not advance any state.
//
// Note [Graph-safe generator states]
// As PyTorch 2.x's CUDAGeneratorState: a generator draws from a state it may share with
// other generator handles (Generator::graphsafe_get_state makes a handle on the state,
// graphsafe_set_state points a generator at another one, clone_state copies one). A graph
// holds the states registered with it (register_generator_state; the default generator's
// current state by every capture_begin), each with its own seed and offset tensors, and a
// captured draw must come from one of them: PyTorch's "Attempt to increase offset for a
// CUDA generator not in capture mode." otherwise. Switching a generator's state during a
// capture (graphsafe_set_state between captured ops) makes the later ops draw from the
// other state on every replay, as eagerly. Several captures may be open at once: each
// keeps its own intragraph offsets per state, so a state may serve two of them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "ember/device.h"
#include "ember/generator.h"

namespace ember::detail {

struct GeneratorState;

/// The state `generator` draws from now (shared, not copied).
std::shared_ptr<GeneratorState> generator_state(const Generator& generator);
/// The state `device`'s default generator draws from now.
std::shared_ptr<GeneratorState> default_generator_state(int device);
Device generator_state_device(const GeneratorState& state) noexcept;

/// A state registered with a capture, and the device tensors its captured ops read.
struct RngCaptureSlot {
  std::shared_ptr<GeneratorState> state;
  const int64_t* seed_ptr;
  const int64_t* offset_ptr;
};

/// Random ops on streams of capture `capture_id` (of `device`) drawing from one of the
/// slots' states reserve intragraph offsets and read their seed and base offset from the
/// slot's pointers when they run.
void rng_capture_prologue(int device, uint64_t capture_id, const std::vector<RngCaptureSlot>& slots);
/// Ends that; writes each slot's whole reservation (its per-replay increment), in slot
/// order, to `increments`.
void rng_capture_epilogue(uint64_t capture_id, std::span<uint64_t> increments) noexcept;
/// For a replay: `state`'s {seed, offset} for the graph's device tensors; advances the
/// state's offset by `increment`.
std::pair<uint64_t, uint64_t> rng_replay_prologue(GeneratorState& state, uint64_t increment);

}  // namespace ember::detail
