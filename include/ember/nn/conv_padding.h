// ConvPadding: a convolution's padding, given as sizes or as nn::kSame /
// nn::kValid.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "ember/tensor.h"

namespace ember::nn {

/// PyTorch's padding='valid' / padding='same' (LibTorch's torch::kValid /
/// torch::kSame). A scoped enum, so that a literal 0 or {1, 2} never converts
/// to it: it stays a size.
enum class ConvPaddingTag { kValid, kSame };
inline constexpr ConvPaddingTag kValid = ConvPaddingTag::kValid;
inline constexpr ConvPaddingTag kSame = ConvPaddingTag::kSame;

/// A module's padding argument: one size for every spatial dim, one size per
/// dim, or a tag.
class ConvPadding {
 public:
  ConvPadding(int64_t value) : sizes_{value} {}                           // NOLINT: implicit by design
  ConvPadding(std::initializer_list<int64_t> values) : sizes_(values) {}  // NOLINT
  ConvPadding(IntList values) : sizes_(std::move(values)) {}              // NOLINT
  ConvPadding(ConvPaddingTag tag) : tag_(tag) {}                          // NOLINT

  /// The tag, if given as one.
  std::optional<ConvPaddingTag> tag() const noexcept { return tag_; }
  /// The sizes as given (empty when a tag).
  const IntList& sizes() const noexcept { return sizes_; }

 private:
  IntList sizes_;
  std::optional<ConvPaddingTag> tag_;
};

}  // namespace ember::nn
