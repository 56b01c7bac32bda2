// cdist (torch.cdist): PyTorch's checks and choice of path, the matrix-product path for
// p == 2 and the custom Function that gives both paths PyTorch's _cdist_backward gradients.
#include <algorithm>
#include <any>
#include <cmath>
#include <string>
#include <vector>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/linalg_distance.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/cdist_direct.h"
#include "ops/launch.h"
#include "runtime/backend_flags.h"

namespace ember {

// Note [cdist's matrix-product path]
// PyTorch's Euclidean path computes |x|^2 + |y|^2 - 2 x.y with one matrix product of augmented
// operands ([-2x, |x|^2, 1] and [y, 1, |y|^2]). Where a distance is small next to the rows'
// norms the subtraction cancels the leading digits and what is left is the product's rounding
// error: PyTorch returns 0 for distinct close rows and non-zero distances between identical
// rows (pytorch#42479, #37734, #57690; TF32 makes it worse). ember's path keeps the one
// product and adds three things:
//  - it centres both inputs on their joint mean first (differences are unchanged; the norms
//    shrink from the data's distance to the origin to its spread);
//  - its product gives shifted = |x|^2 + (1 - tau) |y|^2 - 2 x.y, the squared distance less
//    tau |y|^2, so a row of x1 holds an entry whose squared distance is at most
//    tau (|x|^2 + |y|^2) exactly when its smallest shifted entry is at most tau |x|^2: one
//    reduction marks those rows, which are recomputed directly from the rows' differences
//    (cdist_block), in the forward and in the backward;
//  - under TF32 each norm enters the product as two columns (norm_columns), so TF32's
//    rounding of its inputs reaches the norms only at 2^-22 of their size.
// tau is at least 4 u_in + 4 (M + 1) u, about twice the worst-case relative error of the
// product for two identical rows (u the unit roundoff of the dtype, u_in that of the product's
// inputs: TF32's, 2^-11, on a cuda device with backends::cuda::matmul.allow_tf32), so
// identical rows are always recomputed and come out exactly 0 apart; and at least a floor per
// precision (2^-20 float64, 2^-10 float32, 2^-5 TF32), so a squared distance kept from the
// product carries a relative error of about u_in sqrt(M) / floor at most. Marking reads a
// [B, P] mask back to the host: this path synchronises with the device once per call
// (PyTorch's does not). The rest of the backward is PyTorch's _euclidean_dist_backward (two
// matrix products, which follow the TF32 flag as PyTorch's do); the direct path's backward
// multiplies no matrices, as PyTorch's kernel does not.
namespace {

constexpr double kUnitRoundoffFloat64 = 0x1p-53, kUnitRoundoffFloat32 = 0x1p-24, kUnitRoundoffTf32 = 0x1p-11;

bool product_uses_tf32(const Tensor& x) { return x.dtype() == kFloat32 && x.is_cuda() && detail::matmul_allows_tf32(); }

double cancellation_threshold(const Tensor& x, int64_t M) {
  const bool float64 = x.dtype() == kFloat64, tf32 = product_uses_tf32(x);
  const double u = float64 ? kUnitRoundoffFloat64 : kUnitRoundoffFloat32;
  const double u_in = tf32 ? kUnitRoundoffTf32 : u;
  const double floor = float64 ? 0x1p-20 : tf32 ? 0x1p-5 : 0x1p-10;
  return std::max(floor, 4 * u_in + 4 * static_cast<double>(M + 1) * u);
}

// The columns that carry a norm through the product: the norm itself, or under TF32 the two
// halves of Veltkamp's split (hi holds 11 significant bits, which TF32 keeps exactly; lo the
// rest), so the norm loses 2^-22 of itself to TF32's rounding instead of PyTorch's 2^-11.
std::vector<Tensor> norm_columns(const Tensor& norm, bool tf32) {
  if (!tf32) return {norm};
  Tensor scaled = norm * 8193.0;  // 2^13 + 1
  Tensor hi = scaled - (scaled - norm);
  return {hi, norm - hi};
}

// The rows (flat indices into [B * P]) the product path marked, in chunks that bound the
// recomputation's memory (Note [cdist's blocks]): fn(rows, their batches).
template <typename F>
void for_each_marked_chunk(const std::vector<int64_t>& rows, int64_t P, int64_t R, int64_t M, Device device, F&& fn) {
  const auto chunk = static_cast<size_t>(detail::cdist_rows_per_block(R, M));
  for (size_t start = 0; start < rows.size(); start += chunk) {
    std::vector<int64_t> row(rows.begin() + start, rows.begin() + std::min(rows.size(), start + chunk));
    std::vector<int64_t> batch(row.size());
    for (size_t i = 0; i < row.size(); ++i) batch[i] = row[i] / P;
    fn(tensor(TensorData(row), kInt64).to(device), tensor(TensorData(batch), kInt64).to(device));
  }
}

std::pair<Tensor, Tensor> centred(const Tensor& x1, const Tensor& x2) {
  Tensor centre = (x1.sum(1, true) + x2.sum(1, true)) / static_cast<double>(x1.size(1) + x2.size(1));
  // An inf or NaN input must not spread through the centre to every row: that column stays put.
  centre = where((centre - centre).eq(0.0), centre, 0.0);
  return {x1 - centre, x2 - centre};
}

struct ProductPath {
  Tensor dist;                // [B, P, R]
  Tensor marked;              // bool [B, P, 1]: the rows recomputed directly
  std::vector<int64_t> rows;  // the same rows, as flat indices into [B * P]
};

ProductPath product_path(const Tensor& x1, const Tensor& x2) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  const double tau = cancellation_threshold(x1, M);
  auto [c1, c2] = centred(x1, x2);
  Tensor n1 = (c1 * c1).sum(-1, true), n2 = (c2 * c2).sum(-1, true);
  // One product of PyTorch's augmented operands gives shifted = squared - tau |y|^2 =
  // |x|^2 + (1 - tau) |y|^2 - 2 x.y, so a row holds an entry that lost its digits exactly when
  // its smallest shifted entry is at most tau |x|^2: one reduction finds the rows.
  const bool tf32 = product_uses_tf32(x1);
  std::vector<Tensor> lhs{c1 * -2.0}, rhs{c2}, lhs_norm = norm_columns(n1, tf32),
                                               rhs_norm = norm_columns(n2 * (1.0 - tau), tf32);
  for (const Tensor& n : lhs_norm) {
    lhs.push_back(n);
    rhs.push_back(ones_like(n2));
  }
  for (const Tensor& n : rhs_norm) {
    lhs.push_back(ones_like(n1));
    rhs.push_back(n);
  }
  Tensor shifted = matmul(cat(lhs, -1), cat(rhs, -1).transpose(1, 2));
  Tensor smallest = shifted.min(-1, true);
  // A row with an inf or NaN entry is recomputed too, so it gives the direct path's inf or NaN.
  Tensor marked = (smallest.le(n1 * tau).to(kInt64) + (smallest - smallest).ne(0.0).to(kInt64)).gt(0);
  ProductPath out{(shifted + (n2 * tau).transpose(1, 2)).clamp(0.0).sqrt(), marked, {}};
  const std::vector<int64_t> row_marks = out.marked.reshape({-1}).to(kInt64).cpu().to_vector<int64_t>();
  for (size_t i = 0; i < row_marks.size(); ++i) {
    if (row_marks[i] != 0) out.rows.push_back(static_cast<int64_t>(i));
  }
  if (out.rows.empty()) return out;
  Tensor direct = zeros({B * P, R}, TensorOptions(x1.dtype()).device(x1.device()));
  Tensor x1_rows = x1.reshape({B * P, M});
  for_each_marked_chunk(out.rows, P, R, M, x1.device(), [&](const Tensor& rows, const Tensor& batches) {
    Tensor block = detail::cdist_block(x1_rows.index_select(0, rows).unsqueeze(1), x2.index_select(0, batches), 2.0);
    direct.index_add_(0, rows, block.squeeze(1));
  });
  out.dist = where(out.marked, direct.view({B, P, R}), out.dist);
  return out;
}

std::pair<Tensor, Tensor> product_path_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2,
                                                const Tensor& dist, const Tensor& marked,
                                                const std::vector<int64_t>& rows) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  auto [c1, c2] = centred(x1, x2);
  // PyTorch's _euclidean_dist_backward over the rows the product kept.
  Tensor ratio = where(marked, 0.0, (grad / dist).masked_fill(dist.eq(0.0), 0.0));
  Tensor grad_x1 = c1 * ratio.sum(-1, true) - matmul(ratio, c2);
  Tensor grad_x2 = c2 * ratio.sum(1).unsqueeze(-1) - matmul(ratio.transpose(1, 2), c1);
  if (rows.empty()) return {grad_x1, grad_x2};
  Tensor x1_rows = x1.reshape({B * P, M}), grad_x1_rows = grad_x1.reshape({B * P, M});
  Tensor grad_rows = grad.reshape({B * P, R}), dist_rows = dist.reshape({B * P, R});
  for_each_marked_chunk(rows, P, R, M, x1.device(), [&](const Tensor& rows_t, const Tensor& batches) {
    auto [ga, gb] = detail::cdist_block_backward(
        grad_rows.index_select(0, rows_t).unsqueeze(1), x1_rows.index_select(0, rows_t).unsqueeze(1),
        x2.index_select(0, batches), dist_rows.index_select(0, rows_t).unsqueeze(1), 2.0);
    grad_x1_rows.index_add_(0, rows_t, ga.squeeze(1));
    grad_x2.index_add_(0, batches, gb);
  });
  return {grad_x1_rows.view(x1.sizes()), grad_x2};
}

// x1 [B, P, M], x2 [B, R, M] -> [B, P, R]; the node's name is ember's, its gradients PyTorch's.
struct CdistBackward : autograd::Function<CdistBackward> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x1, const Tensor& x2, double p, bool use_mm) {
    ctx->saved_data["p"] = p;
    ctx->saved_data["use_mm"] = use_mm;
    Tensor dist;
    if (use_mm) {
      ProductPath path = product_path(x1, x2);
      dist = path.dist;
      ctx->saved_data["marked"] = path.marked;
      ctx->saved_data["rows"] = std::move(path.rows);
    } else {
      dist = detail::cdist_direct(x1, x2, p);
    }
    ctx->save_for_backward({x1, x2, dist});
    return dist;
  }

  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const Tensor &x1 = saved[0], &x2 = saved[1], &dist = saved[2];
    const Tensor grad = grads[0].defined() ? grads[0] : zeros_like(dist);
    std::pair<Tensor, Tensor> g;
    if (std::any_cast<bool>(ctx->saved_data["use_mm"])) {
      g = product_path_backward(grad, x1, x2, dist, std::any_cast<Tensor>(ctx->saved_data["marked"]),
                                std::any_cast<const std::vector<int64_t>&>(ctx->saved_data["rows"]));
    } else {
      g = detail::cdist_direct_backward(grad, x1, x2, dist, std::any_cast<double>(ctx->saved_data["p"]));
    }
    return {ctx->needs_input_grad(0) ? g.first : Tensor(), ctx->needs_input_grad(1) ? g.second : Tensor(), Tensor(),
            Tensor()};
  }
};

int64_t compute_mode_number(const std::string& mode) {
  if (mode == "use_mm_for_euclid_dist_if_necessary") return 0;
  if (mode == "use_mm_for_euclid_dist") return 1;
  if (mode == "donot_use_mm_for_euclid_dist") return 2;
  EMBER_CHECK(false, ValueError, mode, " is not a valid value for compute_mode");
  return -1;
}

const char* device_type_name(const Tensor& t) { return t.is_cuda() ? "cuda" : "cpu"; }

}  // namespace

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, const std::string& compute_mode) {
  const int64_t mode = compute_mode_number(compute_mode);
  EMBER_CHECK(x1.dim() >= 2, ValueError, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  EMBER_CHECK(x2.dim() >= 2, ValueError, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  EMBER_CHECK(x1.size(-1) == x2.size(-1), ValueError,
              "X1 and X2 must have the same number of columns. X1: ", x1.size(-1), " X2: ", x2.size(-1));
  EMBER_CHECK(is_floating_point(x1.dtype()), TypeError,
              "cdist only supports floating-point dtypes, X1 got: ", detail::scalar_type_name(x1.dtype()));
  EMBER_CHECK(is_floating_point(x2.dtype()), TypeError,
              "cdist only supports floating-point dtypes, X2 got: ", detail::scalar_type_name(x2.dtype()));
  EMBER_CHECK(p >= 0, ValueError, "cdist only supports non-negative p values");
  EMBER_CHECK(x1.is_cuda() == x2.is_cuda(), DeviceError,
              "X1 and X2 must have the same device type. X1: ", device_type_name(x1), " X2: ", device_type_name(x2));
  EMBER_CHECK(!x1.is_cuda() || x1.get_device() == x2.get_device(), DeviceError, "device of X1 (", x1.get_device(),
              ") must match device of X2 (", x2.get_device(), ")");
  EMBER_CHECK(x1.dtype() == kFloat32 || x1.dtype() == kFloat64, TypeError, "\"cdist\" not implemented for '",
              detail::scalar_type_name(x1.dtype()), "'");
  EMBER_CHECK(x2.dtype() == x1.dtype(), TypeError, "expected scalar type ", detail::scalar_type_name(x1.dtype()),
              " but found ", detail::scalar_type_name(x2.dtype()));

  const int64_t P = x1.size(-2), R = x2.size(-2), M = x1.size(-1);
  IntList batch = detail::broadcast_shapes(IntList(x1.sizes().begin(), x1.sizes().end() - 2),
                                           IntList(x2.sizes().begin(), x2.sizes().end() - 2));
  int64_t B = 1;
  for (int64_t s : batch) B *= s;
  IntList shape1 = batch, shape2 = batch, out_shape = batch;
  shape1.insert(shape1.end(), {P, M});
  shape2.insert(shape2.end(), {R, M});
  out_shape.insert(out_shape.end(), {P, R});
  // Batch dims broadcast outside the Function: expand's backward sums the gradient back.
  Tensor a = x1.expand(shape1).reshape({B, P, M}), b = x2.expand(shape2).reshape({B, R, M});
  const bool nonempty = B * P * R * M > 0;
  const bool use_mm = nonempty && p == 2.0 && (mode == 1 || (mode == 0 && (P > 25 || R > 25)));
  return CdistBackward::apply(a, b, p, use_mm).reshape(out_shape);
}

}  // namespace ember
