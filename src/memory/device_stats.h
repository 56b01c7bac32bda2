// DeviceStats: the counters behind memory_stats(), kept with PyTorch's meaning.
//
// Each Stat tracks current, peak, and the cumulative amounts added (allocated) and
// removed (freed). StatArrays hold one Stat for all pools and one per pool.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace ember::detail {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  void increase(int64_t amount) noexcept {
    current += amount;
    peak = std::max(peak, current);
    allocated += amount;
  }
  void decrease(int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  void reset_accumulated() noexcept { allocated = freed = 0; }
  void reset_peak() noexcept { peak = current; }
};

enum StatType : size_t { kAggregate = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

struct DeviceStats {
  StatArray allocation;      // blocks handed out and not yet freed by the user
  StatArray segment;         // raw_alloc'ed segments
  StatArray active;          // allocated blocks plus blocks whose free waits for streams
  StatArray inactive_split;  // free blocks inside split (non-releasable) segments
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;      // the sizes users asked for, before rounding
  int64_t num_alloc_retries = 0;  // raw allocations retried after freeing the cache
  int64_t num_ooms = 0;
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  int64_t max_split_size = -1;  // -1 when unlimited, as PyTorch reports SIZE_MAX
  Stat oversize_allocations;
  Stat oversize_segments;

  void reset_accumulated() noexcept;
  void reset_peak() noexcept;
  /// memory_stats() keys, e.g. "allocated_bytes.all.current".
  std::map<std::string, int64_t> to_map() const;
};

/// PyTorch's format_size: "512 bytes", "2.00 KiB", "1.50 MiB", "8.00 GiB".
std::string format_size(uint64_t bytes);

/// The memory_summary() table for one device.
std::string format_memory_summary(const std::map<std::string, int64_t>& stats, int device);

}  // namespace ember::detail
