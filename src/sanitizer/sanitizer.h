// The sanitizer's hooks for the rest of ember: the switch, the backend decorator and the
// allocators' reports. See Note [Stream race detection] in sanitizer/race_detector.h.
//
// Off, the only cost anywhere is enabled(): one relaxed load and a predictable branch in
// detail::backend() (the choke point every backend call passes) and in the caching
// allocators' malloc and free.
#pragma once

#include <atomic>
#include <cstddef>

namespace ember::detail {
class Backend;
}

namespace ember::detail::sanitizer {

extern std::atomic<bool> g_enabled;

inline bool enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }

/// The SanitizingBackend over `upstream` (one per process; `upstream` must live forever).
Backend& wrap(Backend& upstream);

/// A caching allocator handed out (or took back) the block [ptr, ptr + bytes).
void on_allocation(const void* ptr, size_t bytes) noexcept;
void on_deallocation(const void* ptr, size_t bytes) noexcept;

/// Applies EMBER_CUDA_SANITIZER unless the program already called enable() or disable()
/// (which win over the environment). Called when the backend is selected.
void configure_from_env();
/// Reads EMBER_CUDA_SANITIZER: "1" enables (Error mode), "warn" enables in Warn mode,
/// "0" or empty leave the setting as it is; another value throws ValueError.
void apply_env();

}  // namespace ember::detail::sanitizer
