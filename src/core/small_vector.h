// SmallVector: a vector whose first N elements live inline.
//
// For the per-launch structures of the op path (a kernel's operands and their shapes,
// the loop shape an element-wise kernel iterates): a launch rarely has more than a few
// operands, a tensor rarely more than a handful of dims, so those fit inline and a
// launch allocates nothing for them. Longer contents spill to the heap, doubling.
// The subset of std::vector's interface this code uses; it converts to and compares
// with std::vector (IntList) so that operand shapes read like the tensor's own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace ember::detail {

template <typename T, size_t N>
class SmallVector {
 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVector() noexcept {}
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& value) { resize(n, value); }
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }  // NOLINT
  SmallVector(const std::vector<T>& values) {
    assign(values.data(), values.data() + values.size());
  }  // NOLINT: as an IntList
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& other) { assign(other.data(), other.data() + other.size()); }
  SmallVector(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.data(), other.data() + other.size());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      clear();
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& values) {
    assign(values.data(), values.data() + values.size());
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() {
    clear();
    release();
  }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: as an IntList

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    T* grown = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignof(T)}));
    std::uninitialized_move(data_, data_ + size_, grown);
    std::destroy(data_, data_ + size_);
    release();
    data_ = grown;
    capacity_ = n;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      T value(std::forward<Args>(args)...);  // the arguments may live in the storage about to move
      reserve(capacity_ * 2);
      new (data_ + size_) T(std::move(value));
    } else if constexpr (sizeof...(Args) == 0 && std::is_class_v<T>) {
      new (data_ + size_) T;  // default-initialised: no zeroing of inline storage
    } else {
      new (data_ + size_) T(std::forward<Args>(args)...);
    }
    return data_[size_++];
  }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void pop_back() noexcept { data_[--size_].~T(); }
  void resize(size_t n) {
    reserve(n);
    while (size_ < n) new (data_ + size_++) T();
    while (size_ > n) pop_back();
  }
  void resize(size_t n, const T& value) {
    reserve(n);
    while (size_ < n) new (data_ + size_++) T(value);
    while (size_ > n) pop_back();
  }
  void assign(size_t n, const T& value) {
    clear();
    resize(n, value);
  }
  /// Assigns over the elements already held (keeping what they own), constructs the rest.
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  void assign(It first, It last) {
    size_t n = static_cast<size_t>(std::distance(first, last));
    if (n > capacity_) {
      clear();
      reserve(n);
    }
    if constexpr (std::is_trivially_copyable_v<T>) {  // a shape: plain stores, no per-element bookkeeping
      for (size_t i = 0; i < n; ++i, ++first) data_[i] = *first;
      size_ = n;
      return;
    }
    size_t i = 0;
    for (; first != last && i < size_; ++first, ++i) data_[i] = *first;
    for (; first != last; ++first) new (data_ + size_++) T(*first);
    while (size_ > n) pop_back();
  }
  void clear() noexcept {
    std::destroy(data_, data_ + size_);
    size_ = 0;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const std::vector<T>& a, const SmallVector& b) { return b == a; }

 private:
  void take(SmallVector& other) {
    if (other.data_ == other.inline_storage()) {
      std::uninitialized_move(other.data_, other.data_ + other.size_, data_);
      size_ = other.size_;
      other.clear();
    } else {
      data_ = other.data_;
      capacity_ = other.capacity_;
      size_ = other.size_;
      other.data_ = other.inline_storage();
      other.capacity_ = N;
      other.size_ = 0;
    }
  }
  void release() noexcept {
    if (data_ != inline_storage()) ::operator delete (data_, std::align_val_t{alignof(T)});
    data_ = inline_storage();
    capacity_ = N;
  }
  T* inline_storage() noexcept { return reinterpret_cast<T*>(inline_); }

  alignas(T) std::byte inline_[N * sizeof(T)];
  T* data_ = inline_storage();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace ember::detail
