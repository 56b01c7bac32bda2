#include "backends/emulated/device_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace ember::detail::emulated {
namespace {

constexpr size_t kAlignment = 512;
// At and above this size an allocation is its own mapping: never touched, never resident.
constexpr size_t kMapThreshold = size_t{1} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

DeviceMemory::~DeviceMemory() {
  for (auto& [ptr, block] : blocks_) {
    if (block.mapped) munmap(ptr, block.mapped);
    else std::free(ptr);
  }
  for (auto& [ptr, length] : reservations_) munmap(ptr, length);
}

void* DeviceMemory::allocate(size_t bytes) {
  std::lock_guard lock(mutex_);
  host_failure_ = 0;
  if (bytes > capacity_ - used_) return nullptr;
  // cudaMalloc(0) succeeds; a distinct non-null pointer keeps "nullptr means failure".
  size_t rounded = round_up(bytes == 0 ? 1 : bytes, kAlignment);
  void* ptr = nullptr;
  size_t mapped = 0;
  if (rounded >= kMapThreshold) {
    mapped = round_up(rounded, 4096);
    ptr = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ptr == MAP_FAILED) {
      host_failure_ = bytes;
      return nullptr;
    }
  } else {
    ptr = std::aligned_alloc(kAlignment, rounded);
    if (ptr == nullptr) {
      host_failure_ = bytes;
      return nullptr;
    }
  }
  blocks_.emplace(ptr, Block{bytes, mapped});
  used_ += bytes;
  return ptr;
}

bool DeviceMemory::release(void* ptr) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(ptr);
  if (it == blocks_.end()) return false;
  if (it->second.mapped) munmap(ptr, it->second.mapped);
  else std::free(ptr);
  used_ -= it->second.bytes;
  blocks_.erase(it);
  return true;
}

size_t DeviceMemory::host_failure() const {
  std::lock_guard lock(mutex_);
  return host_failure_;
}

std::pair<size_t, size_t> DeviceMemory::info() const {
  std::lock_guard lock(mutex_);
  return {capacity_ - used_, capacity_};
}

// Note [Emulated virtual memory]
// cuMemAddressReserve / cuMemCreate + cuMemMap / cuMemUnmap + cuMemRelease, on the host:
// a reservation is an inaccessible (PROT_NONE) anonymous mapping; mapping a range makes
// it readable and writable and counts it against the device's capacity, as cuMemCreate
// takes device memory; unmapping drops its pages (MADV_DONTNEED, so a later map reads
// zeros as fresh memory would) and makes it inaccessible again, so a stale pointer into
// an unmapped range faults as it would on a GPU.
void* DeviceMemory::reserve(size_t bytes) {
  void* ptr = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ptr == MAP_FAILED) return nullptr;
  std::lock_guard lock(mutex_);
  reservations_.emplace(ptr, bytes);
  return ptr;
}

bool DeviceMemory::map(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  host_failure_ = 0;
  const auto* begin = static_cast<const char*>(ptr);
  bool reserved = false;
  for (const auto& [start, length] : reservations_) {
    const auto* first = static_cast<const char*>(start);
    if (begin >= first && begin + bytes <= first + length) reserved = true;
  }
  if (!reserved || bytes > capacity_ - used_) return false;
  if (mprotect(ptr, bytes, PROT_READ | PROT_WRITE) != 0) {
    host_failure_ = bytes;
    return false;
  }
  mapped_.emplace(ptr, bytes);
  granted_[ptr] = 0;
  mapped_count_.store(mapped_.size(), std::memory_order_release);
  used_ += bytes;
  return true;
}

void DeviceMemory::grant_access(void* ptr, int peer) {
  std::lock_guard lock(mutex_);
  const uint64_t bit = uint64_t{1} << (peer & 63);
  if (ptr == nullptr) {
    for (auto& [start, peers] : granted_) peers |= bit;
  } else if (auto it = granted_.find(ptr); it != granted_.end()) {
    it->second |= bit;
  }
}

bool DeviceMemory::owns(const void* ptr) const {
  std::lock_guard lock(mutex_);
  const auto* p = static_cast<const char*>(ptr);
  for (const auto& [start, block] : blocks_)
    if (p >= static_cast<const char*>(start) && p < static_cast<const char*>(start) + block.bytes) return true;
  for (const auto& [start, length] : reservations_)
    if (p >= static_cast<const char*>(start) && p < static_cast<const char*>(start) + length) return true;
  return false;
}

bool DeviceMemory::accessible_from(const void* ptr, size_t bytes, int peer) const {
  std::lock_guard lock(mutex_);
  const auto* begin = static_cast<const char*>(ptr);
  for (const auto& [start, length] : mapped_) {
    const auto* first = static_cast<const char*>(start);
    if (begin < first + length && first < begin + bytes && (granted_.at(start) >> (peer & 63) & 1) == 0) return false;
  }
  return true;
}

bool DeviceMemory::unmap(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = mapped_.find(ptr);
  if (it == mapped_.end() || it->second != bytes) return false;
  madvise(ptr, bytes, MADV_DONTNEED);
  mprotect(ptr, bytes, PROT_NONE);
  used_ -= bytes;
  mapped_.erase(it);
  granted_.erase(ptr);
  mapped_count_.store(mapped_.size(), std::memory_order_release);
  return true;
}

bool DeviceMemory::release_reservation(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = reservations_.find(ptr);
  if (it == reservations_.end() || it->second != bytes) return false;
  const auto* first = static_cast<const char*>(ptr);
  for (const auto& [start, length] : mapped_)
    if (static_cast<const char*>(start) >= first && static_cast<const char*>(start) < first + bytes) return false;
  munmap(ptr, bytes);
  reservations_.erase(it);
  return true;
}

void* PinnedMemory::allocate(size_t bytes) {
  void* ptr = std::aligned_alloc(64, round_up(bytes == 0 ? 1 : bytes, 64));
  if (ptr == nullptr) return nullptr;
  std::lock_guard lock(mutex_);
  blocks_.emplace(ptr, bytes);
  return ptr;
}

bool PinnedMemory::release(void* ptr) {
  {
    std::lock_guard lock(mutex_);
    if (blocks_.erase(ptr) == 0) return false;
  }
  std::free(ptr);
  return true;
}

}  // namespace ember::detail::emulated

namespace ember::detail::emulated {

bool PinnedMemory::register_range(void* ptr, size_t bytes) {
  const auto* begin = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  auto next = registered_.lower_bound(begin);
  if (next != registered_.end() && next->first < begin + bytes) return false;
  if (next != registered_.begin() && std::prev(next)->first + std::prev(next)->second > begin) return false;
  registered_.emplace(begin, bytes);
  return true;
}

bool PinnedMemory::unregister_range(void* ptr) {
  std::lock_guard lock(mutex_);
  return registered_.erase(static_cast<const char*>(ptr)) == 1;
}

size_t PinnedMemory::registered_bytes() const {
  std::lock_guard lock(mutex_);
  size_t total = 0;
  for (const auto& [start, bytes] : registered_) total += bytes;
  return total;
}

}  // namespace ember::detail::emulated
