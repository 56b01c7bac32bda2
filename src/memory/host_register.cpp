// Pinned memory by registration: see host_register.h.
#include "memory/host_register.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ember::detail {
namespace {

constexpr size_t kPageSize = size_t{1} << 12;  // PyTorch's: 4 KiB
constexpr size_t kAlignment = 64;              // as the emulated backend's pinned_alloc

// Faults in pages part, part + parts, ... of [ptr, ptr + bytes): registering resident
// pages is what costs the driver least.
void touch_pages(char* ptr, size_t bytes, size_t part, size_t parts) {
  const size_t pages = (bytes + kPageSize - 1) / kPageSize;
  const size_t per_part = (pages + parts - 1) / parts;
  const size_t end = std::min(pages, (part + 1) * per_part);
  for (size_t page = part * per_part; page < end; ++page) ptr[page * kPageSize] = 0;
}

}  // namespace

void* alloc_registered_host_memory(Backend& backend, size_t bytes, size_t threads) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto* ptr = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
  if (ptr == nullptr) return nullptr;
  try {
    if (threads > 1 && rounded >= kPageSize * threads) {
      std::vector<std::jthread> workers;  // joined at the end of the block
      workers.reserve(threads - 1);
      for (size_t part = 1; part < threads; ++part) workers.emplace_back(touch_pages, ptr, rounded, part, threads);
      touch_pages(ptr, rounded, 0, threads);
    } else {
      touch_pages(ptr, rounded, 0, 1);
    }
    if (backend.host_register(ptr, rounded)) return ptr;
  } catch (...) {
    std::free(ptr);
    throw;
  }
  std::free(ptr);
  return nullptr;
}

void free_registered_host_memory(Backend& backend, void* ptr) {
  backend.host_unregister(ptr);
  std::free(ptr);
}

}  // namespace ember::detail
