// nn::Conv1d/2d/3d and nn::ConvTranspose1d/2d/3d: PyTorch's _ConvNd and _ConvTransposeNd
// over the functional convolutions.
#include "ember/nn/modules/conv.h"

#include <algorithm>
#include <cmath>

#include "core/tensor_impl.h"
#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"
#include "ops/nn/conv_padding.h"

namespace ember::nn {
namespace {

IntList expanded(const ConvSize& size, int64_t dims, const char* name) {
  const IntList& values = size.values();
  EMBER_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == dims, ValueError, "expected ", name,
              " to be a single integer value or a list of ", dims, " values, but got ", name, "=",
              detail::IntListPrinter{values});
  return values.size() == 1 ? IntList(dims, values[0]) : values;
}

// Python's tuple repr: "(3,)" or "(3, 5)".
std::string tuple_repr(const IntList& values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + (values.size() == 1 ? ",)" : ")");
}

bool all_equal(const IntList& values, int64_t value) {
  return std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == value; });
}

template <typename Padding>
Tensor convolve(int64_t dims, const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                const Padding& padding, const IntList& dilation, int64_t groups) {
  switch (dims) {
    case 1: return conv1d(input, weight, bias, stride, padding, dilation, groups);
    case 2: return conv2d(input, weight, bias, stride, padding, dilation, groups);
    default: return conv3d(input, weight, bias, stride, padding, dilation, groups);
  }
}

}  // namespace

ConvNd::ConvNd(int64_t dims, int64_t in_channels, int64_t out_channels, const ConvSize& kernel_size,
               const ConvSize& stride, ConvPadding padding, const ConvSize& dilation, int64_t groups, bool with_bias,
               std::string padding_mode, bool transposed, const ConvSize& output_padding)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expanded(kernel_size, dims, "kernel_size")),
      stride(expanded(stride, dims, "stride")),
      padding(std::move(padding)),
      dilation(expanded(dilation, dims, "dilation")),
      output_padding(expanded(output_padding, dims, "output_padding")),
      groups(groups),
      padding_mode(std::move(padding_mode)) {
  // PyTorch's _ConvTransposeNd.__init__ and _ConvNd.__init__, in their order.
  EMBER_CHECK(!transposed || this->padding_mode == "zeros", ValueError,
              "Only \"zeros\" padding mode is supported for ConvTranspose", dims, "d");
  EMBER_CHECK(groups > 0, ValueError, "groups must be a positive integer");
  EMBER_CHECK(in_channels % groups == 0, ValueError, "in_channels must be divisible by groups");
  EMBER_CHECK(out_channels % groups == 0, ValueError, "out_channels must be divisible by groups");
  const std::optional<ConvPaddingTag> tag = this->padding.tag();
  if (tag == kSame) {
    for (int64_t s : this->stride)
      EMBER_CHECK(s == 1, ValueError, "padding='same' is not supported for strided convolutions");
  }
  const std::string& mode = this->padding_mode;
  EMBER_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", ValueError,
              "padding_mode must be one of {'reflect', 'replicate', 'circular', 'zeros'}, but got padding_mode='", mode,
              "'");
  if (!tag) this->padding = expanded(this->padding.sizes(), dims, "padding");
  // _reversed_padding_repeated_twice: last dim first, (left, right) each; "same" puts an odd
  // total's extra element on the right.
  for (int64_t d = dims - 1; d >= 0; --d) {
    if (tag) {
      const int64_t total = tag == kSame ? this->dilation[d] * (this->kernel_size[d] - 1) : 0;
      reversed_padding_repeated_twice_.push_back(total / 2);
      reversed_padding_repeated_twice_.push_back(total - total / 2);
    } else {
      reversed_padding_repeated_twice_.push_back(this->padding.sizes()[d]);
      reversed_padding_repeated_twice_.push_back(this->padding.sizes()[d]);
    }
  }
  IntList weight_sizes =
      transposed ? IntList{in_channels, out_channels / groups} : IntList{out_channels, in_channels / groups};
  weight_sizes.insert(weight_sizes.end(), this->kernel_size.begin(), this->kernel_size.end());
  weight = register_parameter("weight", empty(weight_sizes));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void ConvNd::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor ConvNd::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    if (padding_mode != "zeros") {
      return convolve(dims(), detail::nn::pad_spatial(input, reversed_padding_repeated_twice_, padding_mode), weight,
                      bias, stride, IntList{0}, dilation, groups);
    }
    if (const auto tag = padding.tag()) return convolve(dims(), input, weight, bias, stride, *tag, dilation, groups);
    return convolve(dims(), input, weight, bias, stride, padding.sizes(), dilation, groups);
  });
}

std::string ConvNd::extra_repr() const {
  // PyTorch's _ConvNd.extra_repr: non-default settings only.
  std::string out = detail::cat(in_channels, ", ", out_channels, ", kernel_size=", tuple_repr(kernel_size),
                                ", stride=", tuple_repr(stride));
  if (const auto tag = padding.tag()) {
    out += tag == kSame ? ", padding=same" : ", padding=valid";
  } else if (!all_equal(padding.sizes(), 0)) {
    out += ", padding=" + tuple_repr(padding.sizes());
  }
  if (!all_equal(dilation, 1)) out += ", dilation=" + tuple_repr(dilation);
  if (!all_equal(output_padding, 0)) out += ", output_padding=" + tuple_repr(output_padding);
  if (groups != 1) out += detail::cat(", groups=", groups);
  if (!bias.defined()) out += ", bias=False";
  if (padding_mode != "zeros") out += ", padding_mode=" + padding_mode;
  return out;
}

void ConvNd::rebind_members(const MemberRemap& remap) {
  remap(weight);
  remap(bias);
}

Tensor ConvTransposeNd::forward(const Tensor& input, const IntList& output_size) {
  return detail::nn::with_module_context(*this, [&] {
    // PyTorch's _ConvTransposeNd._output_padding.
    IntList extra = output_padding;
    if (!output_size.empty()) {
      const int64_t spatial = dims(), leading = input.dim() == spatial + 2 ? 2 : 1;
      IntList wanted = output_size;
      if (static_cast<int64_t>(wanted.size()) == leading + spatial)
        wanted.erase(wanted.begin(), wanted.begin() + leading);
      EMBER_CHECK(static_cast<int64_t>(wanted.size()) == spatial, ValueError, "ConvTranspose", spatial, "D: for ",
                  input.dim(), "D input, output_size must have ", spatial, " or ", leading + spatial, " elements (got ",
                  output_size.size(), ")");
      IntList min_sizes, max_sizes;
      bool fits = true;
      for (int64_t d = 0; d < spatial; ++d) {
        min_sizes.push_back((input.size(d + leading) - 1) * stride[d] - 2 * padding.sizes()[d] +
                            dilation[d] * (kernel_size[d] - 1) + 1);
        max_sizes.push_back(min_sizes[d] + stride[d] - 1);
        fits = fits && wanted[d] >= min_sizes[d] && wanted[d] <= max_sizes[d];
      }
      const IntList input_spatial(input.sizes().end() - spatial, input.sizes().end());
      EMBER_CHECK(fits, ValueError, "requested an output size of ", detail::IntListPrinter{wanted},
                  ", but valid sizes range from ", detail::IntListPrinter{min_sizes}, " to ",
                  detail::IntListPrinter{max_sizes}, " (for an input of torch.Size(",
                  detail::IntListPrinter{input_spatial}, "))");
      for (int64_t d = 0; d < spatial; ++d) extra[d] = wanted[d] - min_sizes[d];
    }
    const IntList& pad = padding.sizes();
    switch (dims()) {
      case 1: return conv_transpose1d(input, weight, bias, stride, pad, extra, groups, dilation);
      case 2: return conv_transpose2d(input, weight, bias, stride, pad, extra, groups, dilation);
      default: return conv_transpose3d(input, weight, bias, stride, pad, extra, groups, dilation);
    }
  });
}

#define EMBER_CONV_MODULE(Name, dims)                                                                               \
  Name::Name(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride, ConvPadding padding, \
             ConvSize dilation, int64_t groups, bool bias, std::string padding_mode)                                \
      : ConvNd(dims, in_channels, out_channels, kernel_size, stride, std::move(padding), dilation, groups, bias,    \
               std::move(padding_mode)) {}                                                                          \
  std::shared_ptr<Module> Name::clone() const {                                                                     \
    return detail::nn::clone_as(*this, [&] {                                                                        \
      return std::make_shared<Name>(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,      \
                                    bias.defined(), padding_mode);                                                  \
    });                                                                                                             \
  }

EMBER_CONV_MODULE(Conv1d, 1)
EMBER_CONV_MODULE(Conv2d, 2)
EMBER_CONV_MODULE(Conv3d, 3)
#undef EMBER_CONV_MODULE

#define EMBER_CONV_TRANSPOSE_MODULE(Name, dims)                                                                      \
  Name::Name(int64_t in_channels, int64_t out_channels, ConvSize kernel_size, ConvSize stride, ConvSize padding,     \
             ConvSize output_padding, int64_t groups, bool bias, ConvSize dilation, std::string padding_mode)        \
      : ConvTransposeNd(dims, in_channels, out_channels, kernel_size, stride, padding.values(), dilation, groups,    \
                        bias, std::move(padding_mode), /*transposed=*/true, output_padding) {}                       \
  std::shared_ptr<Module> Name::clone() const {                                                                      \
    return detail::nn::clone_as(*this, [&] {                                                                         \
      return std::make_shared<Name>(in_channels, out_channels, kernel_size, stride, padding.sizes(), output_padding, \
                                    groups, bias.defined(), dilation, padding_mode);                                 \
    });                                                                                                              \
  }

EMBER_CONV_TRANSPOSE_MODULE(ConvTranspose1d, 1)
EMBER_CONV_TRANSPOSE_MODULE(ConvTranspose2d, 2)
EMBER_CONV_TRANSPOSE_MODULE(ConvTranspose3d, 3)
#undef EMBER_CONV_TRANSPOSE_MODULE

}  // namespace ember::nn
