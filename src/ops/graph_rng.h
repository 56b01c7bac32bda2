// The default generator's side of CUDA graph capture.
//
// Note [Graph-safe Philox]
// A random op captured in a graph must draw new numbers on each replay, so its kernel
// cannot bake in the (seed, offset) of the capture. As PyTorch's CUDA generator: while a
// capture is open, a random op on one of its streams reserves counters relative to the
// capture (the intragraph offset, from 0) and its kernel reads the seed and a base
// offset from two int64 device tensors of the graph. replay() first writes the
// generator's current seed and offset into them (ordinary fills on the replay stream),
// then advances the generator's offset by the capture's whole reservation, so a replay
// draws what the same ops issued eagerly at that point would, and the generator's state
// afterwards is the same. The capture itself does not advance the generator.
#pragma once

#include <cstdint>
#include <utility>

namespace ember::detail {

/// Random ops on streams of capture `capture_id` (of `device`) reserve intragraph offsets
/// and read their seed and base offset from `seed_ptr` and `offset_ptr` when they run.
void rng_capture_prologue(int device, uint64_t capture_id, const int64_t* seed_ptr, const int64_t* offset_ptr);
/// Ends that; returns the capture's whole reservation (the per-replay increment).
uint64_t rng_capture_epilogue(uint64_t capture_id) noexcept;
/// For a replay: the generator's {seed, offset} for the graph's device tensors; advances
/// the device's offset by `increment`.
std::pair<uint64_t, uint64_t> rng_replay_prologue(int device, uint64_t increment);

}  // namespace ember::detail
