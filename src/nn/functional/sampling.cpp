// affine_grid and grid_sample (ember/nn/functional/sampling.h).
#include "ember/nn/functional/sampling.h"

#include <algorithm>
#include <any>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/matmul_precision.h"
#include "ops/nn/grid_sample.h"
#include "ops/op_entry.h"
#include "runtime/backend_flags.h"

namespace ember::nn::functional {
namespace {

// ---- affine_grid --------------------------------------------------------------------------
// Note [affine_grid without a base grid]
// PyTorch builds a base grid {N, H, W, 3} of (x, y, 1) and multiplies it by theta^T with bmm:
// (N * H * W * 3) values written and read for an output two thirds that size. Here each output
// element is theta[n, j, 0] * x_w + theta[n, j, 1] * y_h + theta[n, j, 2], made of broadcast
// products of theta's columns with the axes' coordinates (O(H + W) of them), so the only
// full-size tensors are the two partial sums and the output, and autograd differentiates it
// with respect to theta as it does any product and sum. The contract lists affine_grid under
// backends::cuda::matmul.allow_tf32 because PyTorch's bmm rounds its float32 inputs to TF32
// when allowed. The same rounding is applied here to the same inputs: with the flag on, a
// float32 theta on a cuda device and the axes' coordinates enter the products rounded to TF32
// (10 mantissa bits, nearest even, as the emulated devices' matmul rounds; theta through a
// product with 1 on its device, which is that rounding wherever TF32 runs), and the products
// and sums stay float32, as the bmm's accumulation does. The gradient is theta's unrounded one.

// PyTorch's linspace_from_neg_one: linspace(-1, 1, steps) in the dtype's arithmetic (from both
// ends towards the middle, as at::linspace), scaled by (steps - 1) / steps without
// align_corners; a single step is 0.
template <typename T>
std::vector<double> axis_coordinates(int64_t steps, bool align_corners) {
  std::vector<double> out(static_cast<size_t>(steps), 0.0);
  if (steps <= 1) return out;
  const T step = (T(1) - T(-1)) / static_cast<T>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    T v = i < halfway ? T(-1) + step * static_cast<T>(i) : T(1) - step * static_cast<T>(steps - i - 1);
    if (!align_corners) v = v * static_cast<T>(steps - 1) / static_cast<T>(steps);
    out[static_cast<size_t>(i)] = static_cast<double>(v);
  }
  return out;
}

bool affine_grid_uses_tf32(const Tensor& theta) {
  return theta.dtype() == kFloat32 && theta.is_cuda() && detail::matmul_allows_tf32();
}

// A float rounded to TF32 (sign, exponent, 10 mantissa bits; nearest even; inf and NaN kept).
double round_to_tf32(double value) {
  const auto x = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= 0xffffe000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

// theta's values rounded to TF32 on its device (a product with 1 under TF32), its gradient
// unrounded.
Tensor tf32_values(const Tensor& theta) {
  Tensor flat = theta.detach().reshape({-1, 1});
  Tensor rounded =
      detail::matmul_2d_with_tf32(flat, ones({1, 1}, flat.options()), /*allow_tf32=*/true).reshape(theta.sizes());
  return theta + (rounded - theta.detach());  // exact: rounded - theta is, and their sum is rounded
}

// The coordinates along one output axis as a tensor of theta's dtype and device, shaped to
// broadcast along position `at` of an output of `rank` dims.
Tensor axis(const Tensor& theta, int64_t steps, bool align_corners, size_t at, size_t rank) {
  std::vector<double> values = theta.dtype() == kFloat64 ? axis_coordinates<double>(steps, align_corners)
                                                         : axis_coordinates<float>(steps, align_corners);
  if (affine_grid_uses_tf32(theta)) {
    for (double& v : values) v = round_to_tf32(v);
  }
  IntList shape(rank, 1);
  shape[at] = steps;
  return tensor(values, TensorOptions(theta.dtype()).device(theta.device())).view(shape);
}

std::string tuple_text(const IntList& sizes) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ")";
  return out.str();
}

std::string torch_size_text(const IntList& sizes) {
  std::ostringstream out;
  out << "torch.Size([";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "])";
  return out.str();
}

// ---- grid_sample --------------------------------------------------------------------------

// grid_sampler as a custom Function: PyTorch's GridSampler2DBackward0 / 3D. Its backward is
// not itself differentiable (PyTorch has no derivative for grid_sampler_2d_backward either).
struct GridSampler : autograd::Function<GridSampler> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& input, const Tensor& grid, int64_t interpolation,
                        int64_t padding, bool align_corners) {
    ctx->save_for_backward({input, grid});
    ctx->saved_data["interpolation"] = interpolation;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["align_corners"] = align_corners;
    return detail::grid_sampler(input, grid, interpolation, padding, align_corners);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const bool input_grad = ctx->needs_input_grad(0), grid_grad = ctx->needs_input_grad(1);
    if (!grads[0].defined() || !(input_grad || grid_grad)) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    auto [grad_input, grad_grid] = detail::grid_sampler_backward(
        grads[0], saved[0], saved[1], std::any_cast<int64_t>(ctx->saved_data["interpolation"]),
        std::any_cast<int64_t>(ctx->saved_data["padding"]), std::any_cast<bool>(ctx->saved_data["align_corners"]),
        input_grad, grid_grad);
    return {grad_input, grad_grid, Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor affine_grid(const Tensor& theta, const IntList& size, bool align_corners) {
  EMBER_CHECK(theta.defined(), ValueError, "affine_grid(): expected theta to be defined");
  EMBER_CHECK(is_floating_point(theta.dtype()), TypeError, "Expected theta to have floating point type, but got ",
              theta.dtype());
  if (size.size() == 4) {
    EMBER_CHECK(theta.dim() == 3 && theta.size(-2) == 2 && theta.size(-1) == 3, ValueError,
                "Expected a batch of 2D affine matrices of shape Nx2x3 for size ", tuple_text(size), ". Got ",
                torch_size_text(theta.sizes()), ".");
  } else if (size.size() == 5) {
    EMBER_CHECK(theta.dim() == 3 && theta.size(-2) == 3 && theta.size(-1) == 4, ValueError,
                "Expected a batch of 3D affine matrices of shape Nx3x4 for size ", tuple_text(size), ". Got ",
                torch_size_text(theta.sizes()), ".");
  } else {
    detail::fail<ValueError>(
        "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got size ",
        tuple_text(size), ".");
  }
  EMBER_CHECK(*std::min_element(size.begin(), size.end()) > 0, ValueError,
              "Expected non-zero, positive output size. Got ", tuple_text(size));
  // PyTorch's bmm of the base grid {size[0], ...} by theta^T refuses another batch size.
  const int64_t dims = static_cast<int64_t>(size.size()) - 2;
  EMBER_CHECK(theta.size(0) == size[0], ValueError, "Expected size for first two dimensions of batch2 tensor to be: [",
              size[0], ", ", dims + 1, "] but got: [", theta.size(0), ", ", dims + 1, "].");
  // Output {N, spatial..., dims}: theta's column k as {N, 1, ..., 1, dims}, axis k's
  // coordinates along its output position (x is the last spatial dim).
  const size_t rank = size.size();
  IntList column_shape(rank, 1);
  column_shape[0] = size[0];
  column_shape[rank - 1] = dims;
  const Tensor factors = affine_grid_uses_tf32(theta) ? tf32_values(theta) : theta;
  auto column = [&](int64_t k) { return factors.select(2, k).reshape(column_shape); };
  Tensor grid = column(dims);  // the translation
  for (int64_t k = 0; k < dims; ++k) {
    // Axis k (x, y, z) runs along output position rank - 2 - k, over size[rank - 1 - k].
    const size_t at = rank - 2 - static_cast<size_t>(k);
    grid = column(k) * axis(theta, size[rank - 1 - static_cast<size_t>(k)], align_corners, at, rank) + grid;
  }
  // A size-1 axis leaves its broadcast dim at 1: expand to the full shape, contiguous as PyTorch's.
  IntList out_shape = {size[0]};
  for (size_t d = 2; d < rank; ++d) out_shape.push_back(size[d]);
  out_shape.push_back(dims);
  return grid.expand(out_shape).contiguous();
}

Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode, const std::string& padding_mode,
                   bool align_corners) {
  auto compute = [&](const Tensor& input, const Tensor& grid) {
    int64_t interpolation = 0;
    if (mode == "bilinear") interpolation = 0;
    else if (mode == "nearest") interpolation = 1;
    else if (mode == "bicubic") interpolation = 2;
    else
      detail::fail<ValueError>(
          "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '", mode, "'");
    int64_t padding = 0;
    if (padding_mode == "zeros") padding = 0;
    else if (padding_mode == "border") padding = 1;
    else if (padding_mode == "reflection") padding = 2;
    else
      detail::fail<ValueError>(
          "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '",
          padding_mode, "'");
    // Checked before the Function records anything.
    detail::check_grid_sampler(input, grid, interpolation);
    return GridSampler::apply(input, grid, interpolation, padding, align_corners);
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kGridSample}, compute, input, grid);
}

}  // namespace ember::nn::functional
