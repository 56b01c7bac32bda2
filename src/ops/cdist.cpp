// cdist (torch.cdist): PyTorch's checks and choice of path, the matrix-product path for
// p == 2 and the custom Function that gives both paths PyTorch's _cdist_backward gradients.
#include <algorithm>
#include <any>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/linalg_distance.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/autocast.h"
#include "ops/cdist_direct.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "runtime/backend.h"
#include "runtime/backend_flags.h"
#include "runtime/context.h"
#include "runtime/stream_state.h"

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
//    tau |y|^2, so an entry's squared distance is at most tau (|x|^2 + |y|^2) exactly when its
//    shifted value is at most tau |x|^2: one reduction finds the rows holding such an entry,
//    and only those rows' entries are compared and read back; the entries found (and any that
//    is not finite) are recomputed directly from the rows' differences (cdist_block), in the
//    forward and in the backward;
//  - under TF32 each norm enters the product as two columns (norm_columns), so TF32's
//    rounding of its inputs reaches the norms only at 2^-22 of their size.
// tau is at least 4 u_in + 4 (M + 1) u, about twice the worst-case relative error of the
// product for two identical rows (u the unit roundoff of the dtype, u_in that of the product's
// inputs: TF32's, 2^-11, on a cuda device with backends::cuda::matmul.allow_tf32), so
// identical rows are always recomputed and come out exactly 0 apart; and at least a floor per
// precision (2^-20 float64, 2^-10 float32, 2^-5 TF32), so a squared distance kept from the
// product carries a relative error of about u_in sqrt(M) / floor at most. Marking reads masks
// back to the host ([B, P], then the marked rows' entries): this path synchronises with the
// device once or twice per call (PyTorch's does not); on a stream under graph capture, where
// that is not allowed, cdist takes the direct path (device_stream_capturing). The rest of the
// backward is PyTorch's _euclidean_dist_backward (two matrix products, which follow the TF32 flag as PyTorch's do);
// the direct path's backward multiplies no matrices, as PyTorch's kernel does not.
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

// The entries the product path marked (flat indices into [B * P * R]), in chunks that bound
// the recomputation's memory (Note [cdist's blocks]): fn(entries, their x1 rows as flat indices
// into [B * P], their x2 rows as flat indices into [B * R]).
template <typename F>
void for_each_entry_chunk(const std::vector<int64_t>& entries, int64_t P, int64_t R, int64_t M, Device device, F&& fn) {
  const auto chunk = static_cast<size_t>(detail::cdist_rows_per_block(1, M));
  for (size_t start = 0; start < entries.size(); start += chunk) {
    std::vector<int64_t> entry(entries.begin() + start, entries.begin() + std::min(entries.size(), start + chunk));
    std::vector<int64_t> row1(entry.size()), row2(entry.size());
    for (size_t k = 0; k < entry.size(); ++k) {
      row1[k] = entry[k] / R;
      row2[k] = row1[k] / P * R + entry[k] % R;
    }
    fn(tensor(TensorData(entry), kInt64).to(device), tensor(TensorData(row1), kInt64).to(device),
       tensor(TensorData(row2), kInt64).to(device));
  }
}

// Per entry of `shifted`: 0 kept, 1 lost its digits (shifted <= threshold), 2 not finite (NaN
// and +inf fail `< inf`; their distance is not finite either).
Tensor lost_digits(const Tensor& shifted, const Tensor& threshold) {
  Tensor margin = shifted - threshold;
  return where(margin.lt(std::numeric_limits<double>::infinity()), margin.le(0.0).to(kUInt8), 2);
}

// Sets t's entries `entries` (flat indices, each at most once) to the values values(chunk)
// gives, chunk by chunk. Where those entries are finite, in place and exactly: each is set to 0
// by adding its own negation (x + -x == 0), then given its value; else through a mask.
template <typename F>
void overwrite(Tensor& t, const std::vector<int64_t>& entries, bool finite, int64_t P, int64_t R, int64_t M,
               F&& values) {
  Tensor flat = t.view({-1}), replacement, marks;
  if (!finite) {
    replacement = zeros_like(flat);
    marks = zeros({flat.numel()}, TensorOptions(kInt64).device(t.device()));
  }
  for_each_entry_chunk(entries, P, R, M, t.device(), [&](const Tensor& e, const Tensor& r1, const Tensor& r2) {
    Tensor v = values(e, r1, r2);
    if (finite) {
      flat.index_add_(0, e, -flat.index_select(0, e));
      flat.index_add_(0, e, v);
    } else {
      replacement.index_add_(0, e, v);
      marks.index_add_(0, e, ones({e.size(0)}, TensorOptions(kInt64).device(t.device())));
    }
  });
  if (!finite) t = where(marks.gt(0).view(t.sizes()), replacement.view(t.sizes()), t);
}

// The flat indices of `codes`' non-zero entries; `non_finite` set when one of them is 2.
std::vector<int64_t> nonzero_on_host(const Tensor& codes, bool* non_finite = nullptr) {
  const std::vector<uint8_t> marks = codes.reshape({-1}).to(kUInt8).cpu().to_vector<uint8_t>();
  std::vector<int64_t> out;
  for (size_t i = 0; i < marks.size(); ++i) {
    if (marks[i] == 0) continue;
    out.push_back(static_cast<int64_t>(i));
    if (marks[i] == 2 && non_finite != nullptr) *non_finite = true;
  }
  return out;
}

std::pair<Tensor, Tensor> centred(const Tensor& x1, const Tensor& x2) {
  Tensor centre = (x1.sum(1, true) + x2.sum(1, true)) / static_cast<double>(x1.size(1) + x2.size(1));
  // An inf or NaN input must not spread through the centre to every row: that column stays put.
  centre = where((centre - centre).eq(0.0), centre, 0.0);
  return {x1 - centre, x2 - centre};
}

struct ProductPath {
  Tensor dist;                   // [B, P, R]
  std::vector<int64_t> entries;  // those recomputed directly, as flat indices into [B * P * R]
  bool finite = true;            // whether the recomputed distances are all finite
};

ProductPath product_path(const Tensor& x1, const Tensor& x2) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  const double tau = cancellation_threshold(x1, M);
  auto [c1, c2] = centred(x1, x2);
  Tensor n1 = (c1 * c1).sum(-1, true), n2 = (c2 * c2).sum(-1, true);
  // One product of PyTorch's augmented operands gives shifted = squared - tau |y|^2 =
  // |x|^2 + (1 - tau) |y|^2 - 2 x.y, so an entry lost its digits exactly when shifted is at
  // most tau |x|^2, and a row holds one when its smallest shifted entry does.
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
  Tensor threshold = n1 * tau;
  ProductPath out{(shifted + (n2 * tau).transpose(1, 2)).clamp(0.0).sqrt(), {}, true};
  const std::vector<int64_t> rows = nonzero_on_host(lost_digits(shifted.min(-1, true), threshold));
  if (rows.empty()) return out;
  // Only the marked rows' entries are read back (all of them for cdist(x, x), a [P, R] mask).
  Tensor shifted_rows = shifted.reshape({B * P, R}), threshold_rows = threshold.reshape({B * P, 1});
  if (static_cast<int64_t>(rows.size()) < B * P) {
    Tensor rows_t = tensor(TensorData(rows), kInt64).to(x1.device());
    shifted_rows = shifted_rows.index_select(0, rows_t);
    threshold_rows = threshold_rows.index_select(0, rows_t);
  }
  bool non_finite = false;
  for (int64_t k : nonzero_on_host(lost_digits(shifted_rows, threshold_rows), &non_finite)) {
    out.entries.push_back(rows[static_cast<size_t>(k / R)] * R + k % R);
  }
  out.finite = !non_finite;
  Tensor x1_rows = x1.reshape({B * P, M}), x2_rows = x2.reshape({B * R, M});
  overwrite(out.dist, out.entries, out.finite, P, R, M, [&](const Tensor&, const Tensor& r1, const Tensor& r2) {
    return detail::cdist_block(x1_rows.index_select(0, r1).unsqueeze(1), x2_rows.index_select(0, r2).unsqueeze(1), 2.0)
        .reshape({-1});
  });
  return out;
}

std::pair<Tensor, Tensor> product_path_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2,
                                                const Tensor& dist, const std::vector<int64_t>& entries, bool finite) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  auto [c1, c2] = centred(x1, x2);
  // PyTorch's _euclidean_dist_backward over the entries the product kept.
  Tensor ratio = (grad / dist).masked_fill(dist.eq(0.0), 0.0);
  overwrite(ratio, entries, finite, P, R, M, [&](const Tensor& e, const Tensor&, const Tensor&) {
    return zeros({e.size(0)}, TensorOptions(ratio.dtype()).device(ratio.device()));
  });
  Tensor grad_x1 = c1 * ratio.sum(-1, true) - matmul(ratio, c2);
  Tensor grad_x2 = c2 * ratio.sum(1).unsqueeze(-1) - matmul(ratio.transpose(1, 2), c1);
  if (entries.empty()) return {grad_x1, grad_x2};
  Tensor x1_rows = x1.reshape({B * P, M}), x2_rows = x2.reshape({B * R, M});
  Tensor grad_x1_rows = grad_x1.reshape({B * P, M}), grad_x2_rows = grad_x2.reshape({B * R, M});
  Tensor grad_flat = grad.reshape({-1}), dist_flat = dist.reshape({-1});
  for_each_entry_chunk(entries, P, R, M, x1.device(), [&](const Tensor& entries_t, const Tensor& r1, const Tensor& r2) {
    const int64_t n = entries_t.size(0);
    auto [ga, gb] = detail::cdist_block_backward(
        grad_flat.index_select(0, entries_t).view({n, 1, 1}), x1_rows.index_select(0, r1).unsqueeze(1),
        x2_rows.index_select(0, r2).unsqueeze(1), dist_flat.index_select(0, entries_t).view({n, 1, 1}), 2.0);
    grad_x1_rows.index_add_(0, r1, ga.squeeze(1));
    grad_x2_rows.index_add_(0, r2, gb.squeeze(1));
  });
  return {grad_x1_rows.view(x1.sizes()), grad_x2_rows.view(x2.sizes())};
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
      ctx->saved_data["entries"] = std::move(path.entries);
      ctx->saved_data["finite"] = path.finite;
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
      g = product_path_backward(grad, x1, x2, dist,
                                std::any_cast<const std::vector<int64_t>&>(ctx->saved_data["entries"]),
                                std::any_cast<bool>(ctx->saved_data["finite"]));
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

// The product path reads masks back to the host, which a stream under graph capture does not
// allow; there cdist takes the direct path, whose blocks are sized on the host (exact, without
// TF32's rounding).
bool device_stream_capturing(const Tensor& x) {
  if (!x.is_cuda()) return false;
  detail::Backend* backend = detail::backend_or_null();
  if (backend == nullptr) return false;
  detail::StreamState* stream = detail::current_stream_state(x.get_device());
  return backend->capture_status(stream->native()).first != detail::CaptureStatus::None;
}

Tensor cdist_impl(const Tensor& x1, const Tensor& x2, double p, const std::string& compute_mode) {
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
  // float16 and bfloat16 take the matrix-product path only, as PyTorch's (its direct kernels are
  // float32 and float64): checked once the path is known.
  const bool reduced = x1.dtype() == kFloat16 || x1.dtype() == kBFloat16;
  const auto not_implemented = [&] {
    detail::fail<TypeError>("\"cdist\" not implemented for '", detail::scalar_type_name(x1.dtype()), "'");
  };
  if (x1.dtype() != kFloat32 && x1.dtype() != kFloat64 && !reduced) not_implemented();
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
  // PyTorch allocates the result before any pass over the inputs: a result beyond memory fails
  // here at once, not after sums over broadcast inputs of that size. The block is returned at
  // once (and reused by the result through the caching allocators).
  int64_t out_numel = 0;
  EMBER_CHECK(!__builtin_mul_overflow(B, P, &out_numel) && !__builtin_mul_overflow(out_numel, R, &out_numel),
              OutOfMemoryError, "cdist: a result of ", B, " x ", P, " x ", R, " elements does not fit in memory");
  (void)detail::empty_on({B, P, R}, x1.dtype(), x1.device());
  const bool nonempty = out_numel > 0 && M > 0;
  const bool use_mm =
      nonempty && p == 2.0 && (mode == 1 || (mode == 0 && (P > 25 || R > 25))) && !device_stream_capturing(x1);
  if (reduced) {
    // The product path in float32, the distances rounded once (PyTorch's runs its product in the
    // half dtype, with float accumulation on a GPU).
    if (!use_mm && nonempty) not_implemented();
    return CdistBackward::apply(a.to(kFloat32), b.to(kFloat32), p, use_mm).to(x1.dtype()).reshape(out_shape);
  }
  return CdistBackward::apply(a, b, p, use_mm).reshape(out_shape);
}

}  // namespace

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, const std::string& compute_mode) {
  return detail::op_entry(
      {detail::AutocastOp::kCdist},
      [&](const Tensor& x1, const Tensor& x2) { return cdist_impl(x1, x2, p, compute_mode); }, x1, x2);
}

}  // namespace ember
