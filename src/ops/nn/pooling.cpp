// max_pool2d and avg_pool2d: argument checks and output geometry as PyTorch's
// (pooling_output_shape, pool2d_shape_check), then one MaxPool2d / AvgPool2d KernelCall;
// max_pool2d's input gradient as one MaxPool2dBackward KernelCall.
#include <memory>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/pool_geometry.h"
#include "ops/launch.h"
#include "ops/nn/backward_kernels.h"
#include "ops/recording.h"

namespace ember::nn::functional {
namespace {

using ember::detail::IntListPrinter;
using ember::detail::PoolGeometry;

std::pair<int64_t, int64_t> pool_pair(const IntList& values, const IntList& fallback, const char* op,
                                      const char* what) {
  const IntList& v = values.empty() ? fallback : values;
  EMBER_CHECK(v.size() == 1 || v.size() == 2, ValueError, op, ": ", what);
  return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]};
}

int64_t output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t numerator = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct Prepared {
  Tensor input;  // {N, C, H, W}
  PoolGeometry geometry;
  bool batched;
};

Prepared prepare(const char* op, const Tensor& input, const IntList& kernel_size, const IntList& stride,
                 const IntList& padding, const IntList& dilation, bool ceil_mode) {
  EMBER_CHECK((input.dim() == 3 || input.dim() == 4) && input.numel() > 0, ValueError,
              "non-empty 3D or 4D (batch mode) tensor expected for input");
  EMBER_CHECK(is_floating_point(input.dtype()), TypeError, "\"", op, "\" not implemented for '",
              ember::detail::scalar_type_name(input.dtype()), "'");
  const auto [kh, kw] =
      pool_pair(kernel_size, {}, op, "kernel_size must either be a single int, or a tuple of two ints");
  const auto [sh, sw] =
      pool_pair(stride, kernel_size, op, "stride must either be omitted, a single int, or a tuple of two ints");
  const auto [ph, pw] = pool_pair(padding, {0}, op, "padding must either be a single int, or a tuple of two ints");
  const auto [dh, dw] = pool_pair(dilation, {1}, op, "dilation must be either a single int, or a tuple of two ints");
  EMBER_CHECK(kh > 0 && kw > 0, ValueError, "kernel size should be greater than zero, but got kH: ", kh, " kW: ", kw);
  EMBER_CHECK(sh > 0 && sw > 0, ValueError, "stride should not be zero");
  EMBER_CHECK(dh > 0 && dw > 0, ValueError, "dilation should be greater than zero, but got dilationH: ", dh,
              " dilationW: ", dw);
  EMBER_CHECK(ph >= 0 && pw >= 0, ValueError, "pad must be non-negative, but got pad: ", ph, " pad: ", pw);
  EMBER_CHECK(ph <= kh / 2 && pw <= kw / 2, ValueError,
              "pad should be at most half of kernel size, but got pad=", ph != 0 && ph > kh / 2 ? ph : pw,
              " and kernel_size=", ph > kh / 2 ? kh : kw);
  Tensor x = input.dim() == 3 ? input.unsqueeze(0) : input;
  const int64_t channels = x.size(1), height = x.size(2), width = x.size(3);
  PoolGeometry g{kh, kw, sh, sw, ph, pw, dh, dw, 0, 0, true, 0};
  g.out_h = output_size(height, kh, ph, sh, dh, ceil_mode);
  g.out_w = output_size(width, kw, pw, sw, dw, ceil_mode);
  EMBER_CHECK(g.out_h >= 1 && g.out_w >= 1, ValueError, "Given input size: (", channels, "x", height, "x", width,
              "). Calculated output size: (", channels, "x", g.out_h, "x", g.out_w, "). Output size is too small");
  return {x, g, input.dim() == 4};
}

// The window walk the backward formulas take (formulas_nn.cpp).
IntList geometry_list(const PoolGeometry& g) {
  return {g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w};
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                   const IntList& stride, const IntList& padding,
                                                   const IntList& dilation, bool ceil_mode) {
  Prepared p = prepare("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode);
  const IntList shape{p.input.size(0), p.input.size(1), p.geometry.out_h, p.geometry.out_w};
  Tensor out = ember::detail::empty_on(shape, input.dtype(), input.device());
  Tensor indices = ember::detail::empty_on(shape, kInt64, input.device());
  ember::detail::KernelCall call{ember::detail::OpKind::MaxPool2d,
                                 {ember::detail::make_arg(out), ember::detail::make_arg(indices)},
                                 {ember::detail::make_arg(p.input)}};
  call.payload = std::make_shared<PoolGeometry>(p.geometry);
  ember::detail::launch(input.device(), call);
  if (ember::detail::should_record(p.input)) {
    ember::detail::WindowArgs attrs{geometry_list(p.geometry)};
    ember::detail::record(ember::detail::Formula::MaxPool2d, {p.input}, std::vector<Tensor*>{&out, &indices},
                          std::move(attrs));
  }
  if (!p.batched) return {out.squeeze(0), indices.squeeze(0)};
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  const IntList& dilation, bool ceil_mode) {
  return std::get<0>(max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  EMBER_CHECK(!divisor_override || *divisor_override != 0, ValueError, "divisor must be not zero");
  Prepared p = prepare("avg_pool2d", input, kernel_size, stride, padding, {1}, ceil_mode);
  p.geometry.count_include_pad = count_include_pad;
  p.geometry.divisor_override = divisor_override.value_or(0);
  const IntList shape{p.input.size(0), p.input.size(1), p.geometry.out_h, p.geometry.out_w};
  Tensor out = ember::detail::empty_on(shape, input.dtype(), input.device());
  ember::detail::KernelCall call{
      ember::detail::OpKind::AvgPool2d, {ember::detail::make_arg(out)}, {ember::detail::make_arg(p.input)}};
  call.payload = std::make_shared<PoolGeometry>(p.geometry);
  ember::detail::launch(input.device(), call);
  if (ember::detail::should_record(p.input)) {
    ember::detail::AvgPoolArgs attrs{geometry_list(p.geometry), count_include_pad, divisor_override.value_or(0)};
    ember::detail::record(ember::detail::Formula::AvgPool2d, {p.input}, out, std::move(attrs));
  }
  return p.batched ? out : out.squeeze(0);
}

}  // namespace ember::nn::functional

namespace ember::detail::nn {

Tensor max_pool2d_input_grad(const Tensor& grad_output, const Tensor& indices, const IntList& input_sizes,
                             const PoolGeometry& geometry) {
  Tensor grad_input = empty_on(input_sizes, grad_output.dtype(), grad_output.device());
  KernelCall call{OpKind::MaxPool2dBackward, {make_arg(grad_input)}, {make_arg(grad_output), make_arg(indices)}};
  call.payload = std::make_shared<PoolGeometry>(geometry);
  launch(grad_output.device(), call);
  return grad_input;
}

}  // namespace ember::detail::nn
