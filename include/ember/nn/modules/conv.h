// nn::Conv1d, nn::Conv2d, nn::Conv3d: convolutions over 1, 2 and 3 spatial dims.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "ember/nn/conv_padding.h"
#include "ember/nn/functional/conv.h"
#include "ember/nn/module.h"
#include "ember/nn/size2.h"

namespace ember::nn {

/// A kernel size, stride or dilation: one value for every spatial dim, or one per dim.
class ConvSize {
 public:
  ConvSize(int64_t value) : values_{value} {}                           // NOLINT: implicit by design
  ConvSize(std::initializer_list<int64_t> values) : values_(values) {}  // NOLINT
  ConvSize(IntList values) : values_(std::move(values)) {}              // NOLINT
  ConvSize(const Size2& size) : values_(size.list()) {}                 // NOLINT
  const IntList& values() const noexcept { return values_; }

 private:
  IntList values_;
};

/// PyTorch's _ConvNd: the parameters and settings Conv1d/2d/3d and ConvTranspose1d/2d/3d
/// share. weight [out, in / groups, *kernel_size] ([in, out / groups, *kernel_size] when
/// transposed) and bias [out] start kaiming-uniform (a = sqrt(5)) and uniform(+-1/sqrt(fan_in)),
/// fan_in from the weight, as PyTorch's. padding_mode "zeros", "reflect", "replicate" or
/// "circular": the non-zero modes pad the input with F::pad's mode, then convolve unpadded.
class ConvNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  IntList kernel_size, stride;
  ConvPadding padding;
  IntList dilation;
  IntList output_padding;  // transposed only; zeros otherwise
  int64_t groups;
  std::string padding_mode;
  Tensor weight, bias;

 protected:
  ConvNd(int64_t dims, int64_t in_channels, int64_t out_channels, const ConvSize& kernel_size, const ConvSize& stride,
         ConvPadding padding, const ConvSize& dilation, int64_t groups, bool bias, std::string padding_mode,
         bool transposed = false, const ConvSize& output_padding = 0);
  void rebind_members(const MemberRemap& remap) override;
  int64_t dims() const noexcept { return static_cast<int64_t>(kernel_size.size()); }

 private:
  // PyTorch's _reversed_padding_repeated_twice: F::pad's list for the non-zero modes
  // (last dim first, each side); for kSame, the asymmetric split of each dim's total.
  IntList reversed_padding_repeated_twice_;
};

/// torch.nn.Conv1d over (N, C, L) or (C, L) input.
class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1, ConvPadding padding = 0,
         ConvSize dilation = 1, int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.Conv2d over (N, C, H, W) or (C, H, W) input.
class Conv2d : public ConvNd {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1, ConvPadding padding = 0,
         ConvSize dilation = 1, int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.Conv3d over (N, C, D, H, W) or (C, D, H, W) input.
class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1, ConvPadding padding = 0,
         ConvSize dilation = 1, int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

/// PyTorch's _ConvTransposeNd: forward(input, output_size) picks the output_padding that gives
/// output_size (its spatial dims, or with the batch and channel dims); empty: output_padding.
/// Only padding_mode "zeros".
class ConvTransposeNd : public ConvNd {
 public:
  Tensor forward(const Tensor& input) override { return forward(input, IntList{}); }
  Tensor forward(const Tensor& input, const IntList& output_size);

 protected:
  using ConvNd::ConvNd;
};

/// torch.nn.ConvTranspose1d over (N, C, L) or (C, L) input.
class ConvTranspose1d : public ConvTransposeNd {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1,
                  ConvSize padding = 0, ConvSize output_padding = 0, int64_t groups = 1, bool bias = true,
                  ConvSize dilation = 1, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.ConvTranspose2d over (N, C, H, W) or (C, H, W) input.
class ConvTranspose2d : public ConvTransposeNd {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1,
                  ConvSize padding = 0, ConvSize output_padding = 0, int64_t groups = 1, bool bias = true,
                  ConvSize dilation = 1, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.ConvTranspose3d over (N, C, D, H, W) or (C, D, H, W) input.
class ConvTranspose3d : public ConvTransposeNd {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride = 1,
                  ConvSize padding = 0, ConvSize output_padding = 0, int64_t groups = 1, bool bias = true,
                  ConvSize dilation = 1, std::string padding_mode = "zeros");
  std::shared_ptr<Module> clone() const override;
};

}  // namespace ember::nn
