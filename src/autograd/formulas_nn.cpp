// Derivative formulas of the training ops: cat, where/masked_fill, clamp, softmax,
// log_softmax, the batch statistics of batch_norm, nll_loss and pooling (convolutions:
// formulas_conv.cpp). As in formulas.cpp, each is written with public ops only.
//
// Pooling and convolution scatter gradients back to input positions without a scatter
// kernel: for each kernel offset (i, j), the input positions it read form a strided view
// of a zero-padded buffer (as_strided), distinct within the view, and the offset's share
// of the gradient is added into that view. kernel_h * kernel_w small steps per backward.
// When no graph of the backward is recorded (the usual backward()), max_pool2d takes its
// kernel form instead (ops/nn/backward_kernels.h): one scatter, Col2Im, gemms.
#include <algorithm>

#include "autograd/formulas_nn.h"
#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/fft.h"
#include "ember/ops.h"
#include "ops/nn/backward_kernels.h"

namespace ember::autograd::detail::nn_formulas {

namespace {

Tensor float_mask(const Tensor& cond, DType dtype) { return cond.to(dtype); }

Tensor on(const Tensor& t, const InputInfo& in) { return t.defined() && t.device() != in.device ? t.to(in.device) : t; }

// Geometry of a pooling or convolution window walk (WindowArgs::geometry, AvgPoolArgs::geometry).
struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t N, C, H, W, oh, ow;
  // Padded extent covering every window.
  int64_t Hp() const { return std::max(H + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1); }
  int64_t Wp() const { return std::max(W + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1); }
};

Window window_of(const IntList& geometry, const IntList& input_sizes, const IntList& output_sizes) {
  return {geometry[0],    geometry[1],    geometry[2],     geometry[3],    geometry[4],
          geometry[5],    geometry[6],    geometry[7],     input_sizes[0], input_sizes[1],
          input_sizes[2], input_sizes[3], output_sizes[2], output_sizes[3]};
}

// The (N, channels, oh, ow) view of padded buffer `padded` {N, C, Hp, Wp} that kernel
// offset (i, j) reads, starting at channel `c0`.
Tensor offset_view(const Tensor& padded, const Window& w, int64_t i, int64_t j, int64_t c0, int64_t channels) {
  int64_t Hp = padded.size(2), Wp = padded.size(3), C = padded.size(1);
  return padded.as_strided({w.N, channels, w.oh, w.ow}, {C * Hp * Wp, Hp * Wp, w.sh * Wp, w.sw},
                           c0 * Hp * Wp + i * w.dh * Wp + j * w.dw);
}

Tensor unpad(const Tensor& padded, const Window& w) { return padded.narrow(2, w.ph, w.H).narrow(3, w.pw, w.W); }

Tensor host_tensor_on(std::vector<int64_t> values, const IntList& shape, Device device) {
  return tensor(TensorData(values)).reshape(shape).to(device);
}
Tensor host_tensor_on(std::vector<double> values, const IntList& shape, DType dtype, Device device) {
  return tensor(TensorData(values), TensorOptions(dtype)).reshape(shape).to(device);
}

}  // namespace

Grads cat_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<CatArgs>();
  Grads out(a.sizes.size());
  int64_t offset = 0;
  for (size_t i = 0; i < a.sizes.size(); ++i) {
    int64_t size = a.sizes[i];
    if (n.needs_grad(i) && size >= 0) out[i] = g[0].narrow(a.dim, offset, size);
    offset += std::max<int64_t>(size, 0);
  }
  return out;
}

// split/chunk: one node for all the parts (DimArgs); a part without a gradient counts
// as zeros (FormulaNode::apply), so the parts' gradients join back into the input's.
Grads split_backward(const FormulaNode& n, const Grads& g) { return {ember::cat(g, n.args<DimArgs>().dim)}; }

// stack: input i's gradient is slice i of the output's along DimArgs::dim.
Grads stack_backward(const FormulaNode& n, const Grads& g) {
  Grads out(n.next_edges().size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (n.needs_grad(i)) out[i] = g[0].select(n.args<DimArgs>().dim, static_cast<int64_t>(i));
  }
  return out;
}

// Inputs: condition, a (taken where true), b (where false); also masked_fill (mask, value, self).
Grads where_backward(const FormulaNode& n, const Grads& g) {
  Tensor cond = n.input(0);
  Tensor zero = zeros({}, TensorOptions(g[0].dtype()).device(g[0].device()));
  Tensor ga = n.needs_grad(1) ? on(ember::where(cond, g[0], zero), n.info(1)) : Tensor();
  Tensor gb = n.needs_grad(2) ? on(ember::where(cond, zero, g[0]), n.info(2)) : Tensor();
  return {Tensor(), ga, gb};
}

// ClampArgs: the scalar bounds given.
Grads clamp_scalar_backward(const FormulaNode& n, const Grads& g) {
  Tensor x = n.input(0);
  const auto& a = n.args<ClampArgs>();
  Tensor keep = ones_like(x, TensorOptions(g[0].dtype()));
  if (a.has_min) keep = keep * float_mask(x.ge(a.min), g[0].dtype());
  if (a.has_max) keep = keep * float_mask(x.le(a.max), g[0].dtype());
  return {g[0] * keep};
}

// Inputs: x, min, max (either bound may be undefined). As PyTorch's clamp_backward_min_max:
// where min > max the output is max, so max takes the whole gradient there.
Grads clamp_backward(const FormulaNode& n, const Grads& g) {
  Tensor x = n.input(0), lo = n.input(1), hi = n.input(2);
  Tensor zero = zeros({}, TensorOptions(g[0].dtype()).device(g[0].device()));
  auto pick = [&](const Tensor& where_true) { return ember::where(where_true, g[0], zero); };
  // a or b, a and b over bool masks.
  auto either = [](const Tensor& a, const Tensor& b) { return ember::where(a, Scalar(true), b); };
  auto both = [](const Tensor& a, const Tensor& b) { return ember::where(a, b, Scalar(false)); };
  Grads out(3);
  if (lo.defined() && hi.defined()) {
    if (n.needs_grad(0)) out[0] = pick(both(x.ge(lo), x.le(hi)));
    if (n.needs_grad(1)) out[1] = pick(both(x.lt(lo), lo.lt(hi)));
    if (n.needs_grad(2)) out[2] = pick(either(x.gt(hi), hi.lt(lo)));
  } else if (lo.defined()) {
    if (n.needs_grad(0)) out[0] = pick(x.ge(lo));
    if (n.needs_grad(1)) out[1] = pick(x.lt(lo));
  } else if (hi.defined()) {
    if (n.needs_grad(0)) out[0] = pick(x.le(hi));
    if (n.needs_grad(2)) out[2] = pick(x.gt(hi));
  } else if (n.needs_grad(0)) {
    out[0] = g[0];
  }
  return out;
}

Grads softmax_backward(const FormulaNode& n, const Grads& g) {
  int64_t d = n.args<DimArgs>().dim;
  Tensor y = is_grad_enabled() ? ember::softmax(n.input(0), d) : n.output();
  Tensor gy = g[0] * y;
  return {gy - y * gy.sum(d, true)};
}

Grads log_softmax_backward(const FormulaNode& n, const Grads& g) {
  int64_t d = n.args<DimArgs>().dim;
  Tensor y = is_grad_enabled() ? ember::log_softmax(n.input(0), d) : n.output();
  return {g[0] - y.exp() * g[0].sum(d, true)};
}

// Batch statistics of x {N, C, L} per channel: mean and biased variance (outputs 0, 1).
Grads var_mean_backward(const FormulaNode& n, const Grads& g) {
  Tensor x = n.input(0);
  Tensor mean = is_grad_enabled() ? x.mean({0, 2}, true) : n.output(0).reshape({1, -1, 1});
  double count = static_cast<double>(x.size(0) * x.size(2));
  Tensor g_mean = g[0].reshape({1, -1, 1}), g_var = g[1].reshape({1, -1, 1});
  return {(g_mean + g_var * (x - mean) * 2.0) / count};
}

// x {N, C, L} log-probabilities, t {N, L} class indices, NllLossArgs: ignore_index and
// the reduction (0 none: output 0 is -x[n, t, l] per element; 1 sum; 2 mean
// over the counted elements); output 1 counts the elements (not differentiated). As
// PyTorch's nll_loss_backward, only the picked entries of counted elements are written:
// every other entry's gradient is exactly 0, whatever the incoming gradient (the
// infinite one of a mean over no counted element included).
Grads nll_loss_backward(const FormulaNode& n, const Grads& g) {
  Tensor t = n.input(1);
  const InputInfo& x = n.info(0);
  Tensor classes = arange(x.sizes[1], TensorOptions(kInt64).device(x.device)).reshape({1, -1, 1});
  const auto& a = n.args<NllLossArgs>();
  Tensor counted = t.ne(a.ignore_index);
  Tensor per_element = -g[0];  // 0-dim when reduced
  if (a.reduction == 2) per_element = per_element / counted.to(g[0].dtype()).sum();
  Tensor zero = zeros({}, TensorOptions(g[0].dtype()).device(g[0].device()));
  Tensor written = ember::where(counted, per_element, zero).unsqueeze(1);
  return {ember::where(t.unsqueeze(1).eq(classes), written, zero), Tensor()};
}

// WindowArgs: kh, kw, sh, sw, ph, pw, dh, dw; output 1: the flat input index of each maximum.
Grads max_pool2d_backward(const FormulaNode& n, const Grads& g) {
  Tensor indices = n.output(1);
  Window w = window_of(n.args<WindowArgs>().geometry, n.info(0).sizes, indices.sizes());
  if (!is_grad_enabled()) {
    const ember::detail::PoolGeometry geometry{w.kh, w.kw, w.sh, w.sw, w.ph, w.pw, w.dh, w.dw, w.oh, w.ow};
    return {ember::detail::nn::max_pool2d_input_grad(g[0], indices, n.info(0).sizes, geometry)};
  }
  Tensor padded = zeros({w.N, w.C, w.Hp(), w.Wp()}, TensorOptions(g[0].dtype()).device(g[0].device()));
  for (int64_t i = 0; i < w.kh; ++i) {
    for (int64_t j = 0; j < w.kw; ++j) {
      // The flat index each window reads at offset (i, j); -1 in the padding.
      std::vector<int64_t> position(static_cast<size_t>(w.oh * w.ow));
      for (int64_t y = 0; y < w.oh; ++y) {
        for (int64_t x = 0; x < w.ow; ++x) {
          int64_t r = y * w.sh - w.ph + i * w.dh, c = x * w.sw - w.pw + j * w.dw;
          position[y * w.ow + x] = r >= 0 && r < w.H && c >= 0 && c < w.W ? r * w.W + c : -1;
        }
      }
      Tensor target = host_tensor_on(std::move(position), {w.oh, w.ow}, g[0].device());
      offset_view(padded, w, i, j, 0, w.C).add_(g[0] * float_mask(indices.eq(target), g[0].dtype()));
    }
  }
  return {unpad(padded, w)};
}

// AvgPoolArgs: the window (kh, kw, sh, sw, ph, pw, 1, 1), count_include_pad, divisor_override.
Grads avg_pool2d_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<AvgPoolArgs>();
  Window w = window_of(a.geometry, n.info(0).sizes, g[0].sizes());
  Tensor padded = zeros({w.N, w.C, w.Hp(), w.Wp()}, TensorOptions(g[0].dtype()).device(g[0].device()));
  for (int64_t i = 0; i < w.kh; ++i) {
    for (int64_t j = 0; j < w.kw; ++j) {
      // PyTorch's avg_pool2d: the weight of input element (window y, x; offset i, j).
      std::vector<double> weight(static_cast<size_t>(w.oh * w.ow));
      for (int64_t y = 0; y < w.oh; ++y) {
        for (int64_t x = 0; x < w.ow; ++x) {
          int64_t h0 = y * w.sh - w.ph, w0 = x * w.sw - w.pw;
          int64_t h1 = std::min(h0 + w.kh, w.H + w.ph), w1 = std::min(w0 + w.kw, w.W + w.pw);
          int64_t pool = (h1 - h0) * (w1 - w0);
          int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
          int64_t he = std::min(h1, w.H), we = std::min(w1, w.W);
          int64_t divisor = a.divisor_override != 0 ? a.divisor_override
                            : a.count_include_pad   ? pool
                                                    : (he - hs) * (we - ws);
          int64_t r = h0 + i, c = w0 + j;
          bool inside = r >= hs && r < he && c >= ws && c < we;
          weight[y * w.ow + x] = inside && divisor != 0 ? 1.0 / static_cast<double>(divisor) : 0.0;
        }
      }
      Tensor scale = host_tensor_on(std::move(weight), {w.oh, w.ow}, g[0].dtype(), g[0].device());
      offset_view(padded, w, i, j, 0, w.C).add_(g[0] * scale);
    }
  }
  return {unpad(padded, w)};
}

// One transform over the last k dims of its input (k = FftArgs::signal_sizes.size()): C2C,
// R2C (onesided) or C2R; forward: sign -; scale: the norm's scale. The adjoint of an
// unnormalized DFT is the unnormalized DFT of opposite sign; the onesided transforms follow
// PyTorch's fft_r2c_backward / fft_c2r_backward.
Grads fft_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<FftArgs>();
  const int64_t k = static_cast<int64_t>(a.signal_sizes.size());
  Tensor grad = g[0];
  auto transform = [&](Tensor t, bool forward) {
    for (int64_t i = 0; i < k; ++i) {
      int64_t d = t.dim() - k + i;
      t = forward ? ember::fft::fft(t, std::nullopt, d, "backward") : ember::fft::ifft(t, std::nullopt, d, "forward");
    }
    return t;
  };
  if (a.kind == FftArgs::C2C) return {transform(grad, !a.forward) * a.scale};
  if (a.kind == FftArgs::R2C) {  // rfft: zero-pad the onesided gradient to the full signal, real part of the adjoint
    int64_t last = grad.dim() - 1, full = a.signal_sizes.back();
    if (grad.size(last) < full) {
      IntList pad = grad.sizes();
      pad[last] = full - grad.size(last);
      grad = ember::cat({grad, zeros(pad, TensorOptions(grad.dtype()).device(grad.device()))}, last);
    }
    return {real(transform(grad, false) * a.scale)};
  }
  // irfft: the onesided forward transform of the gradient, inner frequencies counted twice.
  int64_t last = grad.dim() - 1, full = a.signal_sizes.back();
  Tensor gi = ember::fft::rfft(grad, std::nullopt, last, "backward") * a.scale;
  int64_t twice = full - gi.size(last);
  if (twice > 0) {
    IntList w(static_cast<size_t>(gi.size(last)), 1);
    for (int64_t i = 1; i <= twice; ++i) w[static_cast<size_t>(i)] = 2;
    std::vector<double> weights(w.begin(), w.end());
    gi = gi * tensor(TensorData(weights), TensorOptions(to_real(gi.dtype())).device(gi.device()));
  }
  return {gi};
}

}  // namespace ember::autograd::detail::nn_formulas
