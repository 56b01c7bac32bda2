// ExpandableSegment: page mapping over the backend's virtual memory hooks.
// See Note [Expandable segments] in expandable_segment.h.
#include "memory/expandable_segment.h"

#include "ember/errors.h"

namespace ember::detail {

std::unique_ptr<ExpandableSegment> ExpandableSegment::reserve(Backend& backend, int device, size_t page_size,
                                                              size_t pages) {
  void* base = backend.reserve_address_range(device, page_size * pages);
  if (base == nullptr) return nullptr;
  return std::unique_ptr<ExpandableSegment>(
      new ExpandableSegment(backend, device, static_cast<char*>(base), page_size, pages));
}

ExpandableSegment::~ExpandableSegment() {
  if (any_mapped()) return;
  try {
    backend_.release_address_range(device_, base_, size());
  } catch (...) {
    // A device with a sticky error; the range goes with the process.
  }
}

bool ExpandableSegment::any_mapped() const noexcept {
  for (bool page : mapped_)
    if (page) return true;
  return false;
}

size_t ExpandableSegment::map(char* begin, size_t bytes) {
  EMBER_ASSERT(begin >= base_ && (begin - base_) % page_size_ == 0 && bytes > 0);
  const size_t first = static_cast<size_t>(begin - base_) / page_size_;
  const size_t last = first + round_to_pages(bytes) / page_size_;  // one past
  EMBER_ASSERT(last <= mapped_.size());
  for (size_t page = first; page < last; ++page) {
    EMBER_ASSERT(!mapped_[page]);
    if (backend_.map_memory(device_, base_ + page * page_size_, page_size_)) {
      mapped_[page] = true;
      continue;
    }
    // All or nothing: what this call mapped goes back before the failure is reported.
    while (page-- > first) {
      backend_.unmap_memory(device_, base_ + page * page_size_, page_size_);
      mapped_[page] = false;
    }
    return 0;
  }
  return (last - first) * page_size_;
}

std::pair<char*, size_t> ExpandableSegment::unmap(char* begin, size_t bytes) {
  const auto offset = static_cast<size_t>(begin - base_);
  const size_t first = (offset + page_size_ - 1) / page_size_;  // first whole page inside
  const size_t last = (offset + bytes) / page_size_;            // one past the last
  if (first >= last) return {begin, 0};
  for (size_t page = first; page < last; ++page) {
    EMBER_ASSERT(mapped_[page]);
    backend_.unmap_memory(device_, base_ + page * page_size_, page_size_);
    mapped_[page] = false;
  }
  return {base_ + first * page_size_, (last - first) * page_size_};
}

}  // namespace ember::detail
