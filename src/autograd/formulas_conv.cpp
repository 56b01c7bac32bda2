// The derivative formula of conv1d / conv2d / conv3d (one formula, PyTorch's
// ConvolutionBackward0, for 1 to 3 spatial dims), written with public ops only.
//
// When no graph of the backward is recorded (the usual backward()), the
// gradients are the kernel forms of ops/nn/backward_kernels.h: gemms and one
// Col2Im. Otherwise (double backward) they are differentiable ops: for each
// kernel offset, the input positions it read form a strided view of a
// zero-padded buffer (as_strided), distinct within the view, and the offset's
// share of the gradient is added into that view; prod(kernel) small steps.
#include <algorithm>

#include "autograd/formulas_nn.h"
#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/nn/functional.h"
#include "ember/nn/functional/conv.h"
#include "ember/ops.h"
#include "ops/nn/backward_kernels.h"

namespace ember::autograd::detail::nn_formulas {

namespace {

// A convolution's window walk over `dims` spatial dims, each list one value per
// dim.
struct ConvWindow {
  int64_t dims, N, C;
  IntList kernel, stride, pad, dilation, in, out;

  // The zero-padded buffer's sizes {N, C, padded...}: every window fits inside.
  IntList padded_sizes() const {
    IntList sizes{N, C};
    for (int64_t d = 0; d < dims; ++d)
      sizes.push_back(std::max(in[d] + 2 * pad[d], (out[d] - 1) * stride[d] + (kernel[d] - 1) * dilation[d] + 1));
    return sizes;
  }
  // The multi-index of kernel offset `flat` (row-major over kernel).
  IntList offset(int64_t flat) const {
    IntList at(dims);
    for (int64_t d = dims - 1; d >= 0; --d) {
      at[d] = flat % kernel[d];
      flat /= kernel[d];
    }
    return at;
  }
  int64_t kernel_volume() const {
    int64_t v = 1;
    for (int64_t k : kernel) v *= k;
    return v;
  }
};

// WindowArgs: kernel..., stride..., padding..., dilation..., groups, transposed.
ConvWindow conv_window_of(const IntList& geometry, const IntList& input_sizes, const IntList& output_sizes) {
  const auto dims = static_cast<int64_t>(geometry.size() - 2) / 4;
  auto part = [&](int64_t k) { return IntList(geometry.begin() + k * dims, geometry.begin() + (k + 1) * dims); };
  return {dims,
          input_sizes[0],
          input_sizes[1],
          part(0),
          part(1),
          part(2),
          part(3),
          IntList(input_sizes.begin() + 2, input_sizes.end()),
          IntList(output_sizes.begin() + 2, output_sizes.end())};
}

// The (N, channels, out...) view of contiguous `padded` {N, C, padded...} that
// kernel offset `at` reads, starting at channel `c0`.
Tensor offset_view(const Tensor& padded, const ConvWindow& w, const IntList& at, int64_t c0, int64_t channels) {
  IntList stride_of(w.dims + 2, 1);
  for (int64_t d = w.dims + 1; d > 0; --d) stride_of[d - 1] = stride_of[d] * padded.size(d);
  IntList sizes{w.N, channels}, strides{stride_of[0], stride_of[1]};
  int64_t start = c0 * stride_of[1];
  for (int64_t d = 0; d < w.dims; ++d) {
    sizes.push_back(w.out[d]);
    strides.push_back(w.stride[d] * stride_of[2 + d]);
    start += at[d] * w.dilation[d] * stride_of[2 + d];
  }
  return padded.as_strided(sizes, strides, start);
}

Tensor unpad(Tensor padded, const ConvWindow& w) {
  for (int64_t d = 0; d < w.dims; ++d) padded = padded.narrow(2 + d, w.pad[d], w.in[d]);
  return padded;
}

// weight {Cout_g, Cin_g, kernel...} at kernel offset `at`: {Cout_g, Cin_g}.
Tensor at_offset(Tensor weight, const IntList& at) {
  for (auto d = static_cast<int64_t>(at.size()) - 1; d >= 0; --d) weight = weight.select(2 + d, at[d]);
  return weight;
}

// Permutations of {N, C, spatial...}: channels last, back from there, and C and N swapped.
struct Permutations {
  IntList channels_last{0}, channels_back, channels_first{1, 0};
  explicit Permutations(int64_t dims) : channels_back{0, dims + 1} {
    for (int64_t d = 0; d < dims; ++d) {
      channels_last.push_back(2 + d);
      channels_back.push_back(1 + d);
      channels_first.push_back(2 + d);
    }
    channels_last.push_back(1);
  }
};

// The input gradient of the convolution `w` walks, as differentiable ops (double backward).
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const ConvWindow& w, int64_t groups) {
  const int64_t cout_g = weight.size(0) / groups, cin_g = weight.size(1);
  const Permutations perm(w.dims);
  Tensor padded = zeros(w.padded_sizes(), TensorOptions(grad_output.dtype()).device(grad_output.device()));
  for (int64_t k = 0; k < groups; ++k) {
    Tensor gk = grad_output.narrow(1, k * cout_g, cout_g).permute(perm.channels_last);  // {N, out..., Cout_g}
    for (int64_t flat = 0; flat < w.kernel_volume(); ++flat) {
      const IntList at = w.offset(flat);
      Tensor wk = at_offset(weight.narrow(0, k * cout_g, cout_g), at);  // {Cout_g, Cin_g}
      offset_view(padded, w, at, k * cin_g, cin_g).add_(gk.matmul(wk).permute(perm.channels_back));
    }
  }
  return unpad(padded, w);
}

// The weight gradient of the convolution `w` walks from `input` to `grad_output`'s shape, as
// differentiable ops (double backward).
Tensor conv2d_backward_weight(const Tensor& input, const Tensor& grad_output, const Tensor& weight, const ConvWindow& w,
                              int64_t groups) {
  const int64_t cout = weight.size(0), cout_g = cout / groups, cin_g = weight.size(1);
  const Permutations perm(w.dims);
  const TensorOptions options = TensorOptions(grad_output.dtype()).device(grad_output.device());
  Tensor padded = zeros(w.padded_sizes(), options);
  unpad(padded, w).copy_(input);
  Tensor grad_weight = zeros(weight.sizes(), options);
  const int64_t rows = grad_output.numel() / cout;
  for (int64_t k = 0; k < groups; ++k) {
    Tensor gk = grad_output.narrow(1, k * cout_g, cout_g).permute(perm.channels_first).reshape({cout_g, rows});
    for (int64_t flat = 0; flat < w.kernel_volume(); ++flat) {
      const IntList at = w.offset(flat);
      Tensor xk = offset_view(padded, w, at, k * cin_g, cin_g).permute(perm.channels_last).reshape({rows, cin_g});
      at_offset(grad_weight.narrow(0, k * cout_g, cout_g), at).copy_(gk.matmul(xk));
    }
  }
  return grad_weight;
}

// The convolution of `input` as the window `w` describes (a transposed node's input
// gradient), cut to `sizes` (an output_padding of stride or more leaves extra positions).
Tensor convolve(const Tensor& input, const Tensor& weight, const ConvWindow& w, int64_t groups, const IntList& sizes) {
  Tensor out = w.dims == 1   ? ember::conv1d(input, weight, {}, w.stride, w.pad, w.dilation, groups)
               : w.dims == 2 ? ember::conv2d(input, weight, {}, w.stride, w.pad, w.dilation, groups)
                             : ember::conv3d(input, weight, {}, w.stride, w.pad, w.dilation, groups);
  for (int64_t d = 0; d < w.dims; ++d) out = out.narrow(2 + d, 0, sizes[2 + d]);
  return out;
}

}  // namespace

// Inputs: x, weight, bias {C_out} or undefined. WindowArgs: kernel..., stride..., padding...,
// dilation..., groups, transposed. A convolution maps x {N, C_in, spatial...} with weight
// {C_out, C_in/groups, kernel...} to {N, C_out, out...}; a transposed one is its adjoint: x
// plays the convolution's output and the node's output its input (weight {C_in, C_out/groups, ...}).
Grads conv2d_backward(const FormulaNode& n, const Grads& g) {
  const IntList& geometry = n.args<WindowArgs>().geometry;
  const bool transposed = geometry.back() != 0;
  const int64_t groups = geometry[geometry.size() - 2];
  const Tensor weight = n.input(1);
  const IntList& x_sizes = n.info(0).sizes;
  // The convolution's walk, from its input's shape to its output's.
  const ConvWindow w =
      transposed ? conv_window_of(geometry, g[0].sizes(), x_sizes) : conv_window_of(geometry, x_sizes, g[0].sizes());
  Grads out(3);
  if (!is_grad_enabled()) {
    const auto conv = ember::detail::nn::conv_geometry(w.kernel, w.stride, w.pad, w.dilation, w.out);
    if (!transposed) {
      auto grads = ember::detail::nn::convolution_backward(g[0], n.needs_grad(1) ? n.input(0) : Tensor(), x_sizes,
                                                           weight, conv, groups, n.needs_grad(0), n.needs_grad(1));
      out[0] = grads.input;
      out[1] = grads.weight;
    } else {
      if (n.needs_grad(0)) out[0] = convolve(g[0], weight, w, groups, x_sizes);
      if (n.needs_grad(1)) {
        out[1] = ember::detail::nn::convolution_backward(n.input(0), g[0], g[0].sizes(), weight, conv, groups,
                                                         /*need_input=*/false, /*need_weight=*/true)
                     .weight;
      }
    }
  } else {
    if (n.needs_grad(0))
      out[0] = transposed ? convolve(g[0], weight, w, groups, x_sizes) : conv2d_backward_input(g[0], weight, w, groups);
    if (n.needs_grad(1)) {
      out[1] = transposed ? conv2d_backward_weight(g[0], n.input(0), weight, w, groups)
                          : conv2d_backward_weight(n.input(0), g[0], weight, w, groups);
    }
  }
  if (n.needs_grad(2)) {
    IntList dims{0};  // every dim but the channels', in one pass (a float16 bias gradient rounds once)
    for (int64_t d = 2; d < g[0].dim(); ++d) dims.push_back(d);
    out[2] = g[0].sum(dims);
  }
  return out;
}

}  // namespace ember::autograd::detail::nn_formulas
