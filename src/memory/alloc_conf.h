// AllocatorConfig: the caching allocator's tunables, parsed from PYTORCH_CUDA_ALLOC_CONF.
//
// Grammar (PyTorch's): comma-separated `key:value` options, where
// roundup_power2_divisions also takes a bracketed list `[256:1,512:2,>:8]` whose keys
// are power-of-two sizes in MiB. Every key PyTorch 2.x's CUDA allocator reads is accepted
// and acts; unknown keys, bad values and empty options (",", ",,", a leading ","; one
// trailing "," is allowed, as PyTorch's tokenizer allows it) throw ValueError with
// PyTorch's message and the value given, so a typo never silently falls back to the
// defaults. Booleans are PyTorch's "True" and "False", nothing else.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
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
  /// PYTORCH_NO_CUDA_MEMORY_CACHING: every free returns its segment to the device.
  bool caching_enabled = true;

  /// Divisions that apply to a request of `size` bytes.
  size_t divisions_for(size_t size) const noexcept;
};

/// Parses a PYTORCH_CUDA_ALLOC_CONF value; throws ValueError on unknown keys or bad values.
AllocatorConfig parse_alloc_conf(std::string_view conf);

/// The process-wide configuration from the environment (read once).
const AllocatorConfig& env_alloc_config();

}  // namespace ember::detail
