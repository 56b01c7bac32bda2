// AllocatorConfig: the caching allocator's tunables, parsed from PYTORCH_ALLOC_CONF (or
// its deprecated alias PYTORCH_CUDA_ALLOC_CONF) and from set_allocator_settings().
//
// Grammar (PyTorch's): comma-separated `key:value` options, where
// roundup_power2_divisions also takes a bracketed list `[256:1,512:2,>:8]` whose keys
// are power-of-two sizes in MiB. Every key of today's CUDA note (and PyTorch 2.x's
// per_process_memory_fraction) is accepted and acts; unknown keys, bad values and empty
// options (",", ",,", a leading ","; one trailing "," is allowed, as PyTorch's tokenizer
// allows it) throw ValueError with PyTorch's message and the value given, so a typo never
// silently falls back to the defaults. Booleans are PyTorch's "True" and "False", nothing
// else.
//
// Note [Allocator settings at run time]
// As PyTorch's AllocatorConfig::parseArgs, parsing starts from the settings in force:
// max_split_size_mb, roundup_power2_divisions and garbage_collection_threshold return to
// their defaults unless given again, every other key keeps its value unless given. The
// environment's settings are read once per process: PYTORCH_ALLOC_CONF when it is set
// (even empty), else PYTORCH_CUDA_ALLOC_CONF (with PyTorch's deprecation warning, once).
// set_allocator_settings() parses over the settings in force and, only when the whole
// value is valid, makes the result current (ember leaves nothing half-applied, where
// PyTorch keeps the keys parsed before a bad one). What acts when (PyTorch reads the
// same keys at the same points):
// - the native caching allocators of all devices, existing and later ones, take
//   max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions,
//   garbage_collection_threshold, expandable_segments (new segments only: existing ones
//   keep their kind) and release_lock_on_cudamalloc at once;
// - the pinned allocator takes pinned_use_cuda_host_register and
//   pinned_num_register_threads for its next new blocks, pinned_use_background_threads
//   only when it is made (PyTorch starts the thread in the allocator's constructor);
// - per_process_memory_fraction caps device allocators when they are made (PyTorch's
//   DeviceCachingAllocator constructor); existing ones keep theirs
//   (set_per_process_memory_fraction changes them);
// - backend is fixed when the first device allocator is made: a different value is an
//   Error ("Allocator backend parsed at runtime != allocator backend parsed at load time").
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace ember::detail {

/// Number of power-of-two intervals roundup_power2_divisions covers: [1 MiB, 64 GiB).
inline constexpr size_t kRoundupPower2Intervals = 16;

struct AllocatorConfig {
  /// Blocks at least this large are never split ("oversize"); SIZE_MAX: no limit.
  size_t max_split_size = std::numeric_limits<size_t>::max();
  /// max_non_split_rounding_mb: a request of max_split_size or more takes a cached oversize
  /// block only if the block exceeds it by less than this (default: the 20 MiB large segment).
  size_t max_non_split_rounding_size = size_t{20} << 20;
  /// Divisions per power-of-two interval (index 0 is sizes below 2 MiB); 0/1: plain 512 B rounding.
  std::array<size_t, kRoundupPower2Intervals> roundup_power2_divisions{};
  /// Fraction of the allowed memory above which old cached blocks are reclaimed; 0: off.
  double garbage_collection_threshold = 0.0;
  /// Large and small pools grow one segment per stream by mapping pages into a reserved
  /// address range (Note [Expandable segments] in memory/expandable_segment.h).
  bool expandable_segments = false;
  /// release_lock_on_cudamalloc: the caching allocator's mutex is let go during the
  /// backend's raw allocation, so other threads' cached allocations and frees go on meanwhile.
  bool release_lock_on_malloc = false;
  /// backend:cudaMallocAsync: stream-ordered allocation instead of the caching allocator.
  bool use_async_allocator = false;
  /// Pinned memory is malloc'd and registered instead of allocated page-locked.
  bool pinned_use_host_register = false;
  /// Threads that register one large pinned allocation (a power of two, at most 128).
  size_t pinned_num_register_threads = 1;
  /// A thread of the pinned allocator processes its events instead of its malloc.
  bool pinned_use_background_threads = false;
  /// per_process_memory_fraction: the cap a device allocator starts with, as a fraction of
  /// the device's memory; nullopt: none until set_per_process_memory_fraction.
  std::optional<double> per_process_memory_fraction;
  /// PYTORCH_NO_CUDA_MEMORY_CACHING: every free returns its segment to the device.
  bool caching_enabled = true;

  /// Divisions that apply to a request of `size` bytes.
  size_t divisions_for(size_t size) const noexcept;
};

/// Parses `conf` over `base` (Note [Allocator settings at run time]); throws ValueError on
/// unknown keys or bad values.
AllocatorConfig parse_alloc_conf(std::string_view conf, const AllocatorConfig& base = {});

/// The environment's allocator settings: PYTORCH_ALLOC_CONF's value when `alloc_conf` is
/// set, else PYTORCH_CUDA_ALLOC_CONF's (`deprecated_alias` then true); nullopt when neither is.
struct AllocConfEnv {
  std::optional<std::string> value;
  bool deprecated_alias = false;
};
AllocConfEnv choose_alloc_conf_env(const char* alloc_conf, const char* cuda_alloc_conf);

/// The process-wide configuration from the environment (read once).
const AllocatorConfig& env_alloc_config();

/// The settings in force: the environment's, then set_allocator_settings' changes.
AllocatorConfig current_alloc_config();
/// The last settings string parsed (the environment's or set_allocator_settings').
std::string last_allocator_settings();
/// Parses `settings` over the settings in force and makes the result current; returns it.
/// ValueError/Error with nothing changed when `settings` is bad or changes `backend`.
AllocatorConfig update_alloc_config(std::string_view settings);

}  // namespace ember::detail
