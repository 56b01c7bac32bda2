// PointerMap and NodeRecycler: the allocators' hot-path containers.
//
// PointerMap finds the block of a user pointer: open addressing with linear probing
// and backward-shift deletion, keyed by the block's own `ptr` member, so a lookup is
// one multiply and usually one cache line, and insert/erase never call malloc except
// to grow. NodeRecycler keeps freed std::set nodes for reuse, so splitting and
// merging blocks do not go through the system allocator either.
// Neither is thread-safe: each allocator guards them with its own mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace ember::detail {

template <typename Block>
class PointerMap {
 public:
  PointerMap() { rehash(1024); }

  /// Adds `block` under block->ptr, which must not be present.
  void insert(Block* block) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    place(block);
    ++count_;
  }

  Block* find(const void* ptr) const noexcept {
    for (size_t i = home(ptr);; i = (i + 1) & mask_) {
      Block* block = slots_[i];
      if (block == nullptr || block->ptr == ptr) return block;
    }
  }

  /// Removes and returns the block of `ptr`, or nullptr if there is none.
  Block* erase(const void* ptr) noexcept {
    size_t hole = home(ptr);
    while (slots_[hole] != nullptr && slots_[hole]->ptr != ptr) hole = (hole + 1) & mask_;
    Block* found = slots_[hole];
    if (found == nullptr) return nullptr;
    // Shift later members of the probe run back so lookups never stop at the hole.
    for (size_t next = (hole + 1) & mask_; slots_[next] != nullptr; next = (next + 1) & mask_) {
      size_t want = home(slots_[next]->ptr);
      bool movable = hole <= next ? (want <= hole || want > next) : (want <= hole && want > next);
      if (movable) {
        slots_[hole] = slots_[next];
        hole = next;
      }
    }
    slots_[hole] = nullptr;
    --count_;
    return found;
  }

  size_t size() const noexcept { return count_; }

  template <typename F>
  void for_each(F&& f) const {
    for (Block* block : slots_)
      if (block != nullptr) f(block);
  }

 private:
  size_t home(const void* ptr) const noexcept {
    // Fibonacci hashing: blocks are 512-byte aligned, so the low bits carry no entropy.
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(ptr) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void place(Block* block) noexcept {
    size_t i = home(block->ptr);
    while (slots_[i] != nullptr) i = (i + 1) & mask_;
    slots_[i] = block;
  }
  void rehash(size_t capacity) {
    std::vector<Block*> old(capacity, nullptr);
    old.swap(slots_);
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    for (Block* block : old)
      if (block != nullptr) place(block);
  }

  std::vector<Block*> slots_;
  size_t count_ = 0;
  size_t mask_ = 0;
  unsigned shift_ = 0;
};

/// Free nodes of one size, shared by the std::sets of one allocator.
class NodeRecycler {
 public:
  NodeRecycler() = default;
  NodeRecycler(const NodeRecycler&) = delete;
  NodeRecycler& operator=(const NodeRecycler&) = delete;
  ~NodeRecycler() {
    for (void* node : free_) ::operator delete(node);
  }
  void* take(size_t bytes) {
    if (bytes == node_size_ && !free_.empty()) {
      void* node = free_.back();
      free_.pop_back();
      return node;
    }
    return ::operator new(bytes);
  }
  void give(void* node, size_t bytes) noexcept {
    if (node_size_ == 0) node_size_ = bytes;
    if (bytes == node_size_) {
      try {
        free_.push_back(node);
        return;
      } catch (...) {
      }
    }
    ::operator delete(node);
  }

 private:
  size_t node_size_ = 0;
  std::vector<void*> free_;
};

/// std allocator over a NodeRecycler, for node-based containers.
template <typename T>
struct RecyclingAllocator {
  using value_type = T;
  NodeRecycler* recycler;

  explicit RecyclingAllocator(NodeRecycler* r) noexcept : recycler(r) {}
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>& other) noexcept : recycler(other.recycler) {}
  T* allocate(size_t n) {
    return n == 1 ? static_cast<T*>(recycler->take(sizeof(T))) : static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* ptr, size_t n) noexcept {
    if (n == 1) {
      recycler->give(ptr, sizeof(T));
    } else {
      ::operator delete(ptr);
    }
  }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>& other) const noexcept {
    return recycler == other.recycler;
  }
};

}  // namespace ember::detail
