// Size2: a spatial size given once for both dimensions or as a pair (LibTorch's ExpandingArray<2>).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "ember/errors.h"
#include "ember/tensor.h"

namespace ember::nn {

/// `3` means {3, 3}; `{3, 5}` is itself. Remembers which form it was given in, because
/// PyTorch's pooling reprs print what was given ("kernel_size=2" vs "kernel_size=(2, 3)").
class Size2 {
 public:
  Size2(int64_t value) : values_{value, value}, single_(true) {}  // NOLINT: implicit by design
  Size2(std::initializer_list<int64_t> values) : Size2(IntList(values)) {}
  Size2(const IntList& values) : single_(values.size() == 1) {  // NOLINT
    EMBER_CHECK(values.size() == 1 || values.size() == 2, ValueError,
                "expected a single value or a list of 2 values, but got ", values.size(), " values");
    values_ = values.size() == 1 ? IntList{values[0], values[0]} : values;
  }

  int64_t operator[](size_t i) const { return values_.at(i); }
  const IntList& list() const noexcept { return values_; }
  bool single() const noexcept { return single_; }
  /// "2" when given as one value, else "(2, 3)".
  std::string repr() const {
    if (single_) return std::to_string(values_[0]);
    return "(" + std::to_string(values_[0]) + ", " + std::to_string(values_[1]) + ")";
  }
  /// Always the pair: "(2, 2)" (Conv2d's repr).
  std::string pair_repr() const { return "(" + std::to_string(values_[0]) + ", " + std::to_string(values_[1]) + ")"; }

 private:
  IntList values_;
  bool single_;
};

}  // namespace ember::nn
