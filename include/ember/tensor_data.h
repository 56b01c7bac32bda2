// TensorData: nested initializer lists of numbers, as in torch.tensor([[1, 2], [3, 4]]).
#pragma once

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "ember/scalar.h"

namespace ember {

class TensorData {
 public:
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorData(T value) : leaf_(true), value_(value) {}  // NOLINT
  template <typename T>
  TensorData(std::complex<T> value) : leaf_(true), value_(value) {}  // NOLINT
  TensorData(std::initializer_list<TensorData> items) : leaf_(false), items_(items) {}
  /// A 1-D list from a vector.
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorData(const std::vector<T>& values) : leaf_(false) {  // NOLINT
    items_.reserve(values.size());
    for (const T& v : values) items_.emplace_back(v);
  }

  bool is_leaf() const noexcept { return leaf_; }
  const Scalar& value() const noexcept { return value_; }
  const std::vector<TensorData>& items() const noexcept { return items_; }

 private:
  bool leaf_;
  Scalar value_;
  std::vector<TensorData> items_;
};

}  // namespace ember
