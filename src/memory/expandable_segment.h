// ExpandableSegment: a reserved device address range whose pages are mapped on demand.
//
// Note [Expandable segments]
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch's ExpandableSegment): instead
// of a new segment for every allocation that finds no cached block, each stream gets one
// segment per pool that reserves address space for the whole device (1 1/8 of its memory,
// so that pages unmapped early can be mapped again at the end) and maps physical pages,
// 2 MiB ones for the small pool and 20 MiB ones for the large pool, as allocations need
// them. A batch size that changes every step then grows the one segment instead of
// leaving a trail of segments each a little too small for the next step.
// - The caching allocator keeps the unmapped ranges as blocks with mapped == false; a
//   free block followed by unmapped pages grows into them (try_allocate_expandable_block).
// - empty_cache unmaps the whole pages of free blocks; a segment with no page left
//   mapped gives its address range back.
// - memory_stats count mapped bytes as reserved (num_device_alloc / num_device_free per
//   map / unmap), and leave segment.* and inactive_split.* to fixed segments, as PyTorch
//   does; snapshots show one segment per contiguous mapped range, "is_expandable": true.
// The pages come from the backend's virtual memory hooks (runtime/backend.h): the driver
// maps cuMemCreate allocations, the emulated backend commits host pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/backend.h"

namespace ember::detail {

class ExpandableSegment {
 public:
  /// Reserves `pages` pages of `page_size` bytes on `device`; nullptr when the backend cannot.
  static std::unique_ptr<ExpandableSegment> reserve(Backend& backend, int device, size_t page_size, size_t pages);
  /// Gives the address range back if no page is mapped (pages in use go with the process).
  ~ExpandableSegment();
  ExpandableSegment(const ExpandableSegment&) = delete;
  ExpandableSegment& operator=(const ExpandableSegment&) = delete;

  char* ptr() const noexcept { return base_; }
  size_t size() const noexcept { return page_size_ * mapped_.size(); }
  size_t page_size() const noexcept { return page_size_; }
  /// `bytes` rounded up to whole pages.
  size_t round_to_pages(size_t bytes) const noexcept { return (bytes + page_size_ - 1) / page_size_ * page_size_; }

  /// Maps the unmapped pages covering [begin, begin + bytes), `begin` on a page boundary;
  /// returns the bytes mapped (whole pages), or 0, with nothing mapped, when the device
  /// has too little memory.
  size_t map(char* begin, size_t bytes);
  /// Unmaps the whole pages inside [begin, begin + bytes); returns the unmapped range
  /// ({begin, 0} when no whole page lies inside).
  std::pair<char*, size_t> unmap(char* begin, size_t bytes);
  /// True when some page is mapped.
  bool any_mapped() const noexcept;

 private:
  ExpandableSegment(Backend& backend, int device, char* base, size_t page_size, size_t pages)
      : backend_(backend), device_(device), base_(base), page_size_(page_size), mapped_(pages, false) {}

  Backend& backend_;
  const int device_;
  char* const base_;
  const size_t page_size_;
  std::vector<bool> mapped_;  // per page
};

}  // namespace ember::detail
