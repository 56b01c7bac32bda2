// matmul (1-D, 2-D and batched with broadcasting), bmm, addmm, baddbmm and index_select.
#include "ember/errors.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/matmul_math.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/matmul_precision.h"
#include "ops/op_entry.h"
#include "runtime/backend_flags.h"

namespace ember {

using detail::IntListPrinter;
using detail::KernelCall;
using detail::OpKind;

namespace {

// A (B, rows, cols) view of `t` broadcast to batch shape `batch`; copies only when the
// batch dims cannot be flattened into one strided dim.
Tensor as_batched(const Tensor& t, const IntList& batch, int64_t batch_numel) {
  IntList shape = batch;
  shape.push_back(t.size(-2));
  shape.push_back(t.size(-1));
  return t.expand(shape).reshape({batch_numel, t.size(-2), t.size(-1)});
}

// cuBLAS's reduced-precision switches as a Matmul launch carries them (Note [Matmul math]):
// float16 / bfloat16 on a cuda device only, read now, as PyTorch reads them per call.
int64_t blas_math(const Tensor& a) {
  using backends::detail::BlasSwitch;
  using detail::blas_allows;
  if (!a.is_cuda()) return -1;
  if (a.dtype() == kFloat16) {
    return (blas_allows(BlasSwitch::kFp16ReducedPrecisionReduction) ? detail::kMatmulReducedReduction : 0) |
           (blas_allows(BlasSwitch::kFp16Accumulation) ? detail::kMatmulHalfAccumulation : 0);
  }
  if (a.dtype() == kBFloat16) {
    return blas_allows(BlasSwitch::kBf16ReducedPrecisionReduction) ? detail::kMatmulReducedReduction : 0;
  }
  return -1;
}

// c10's TypeMeta names, as PyTorch prints a tensor's dtype() in some messages.
const char* cpp_type_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int16: return "short int";
    case DType::Int32: return "int";
    case DType::Int64: return "long int";
    case DType::Float16: return "c10::Half";
    case DType::BFloat16: return "c10::BFloat16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Complex64: return "c10::complex<float>";
    case DType::Complex128: return "c10::complex<double>";
  }
  return "?";
}

}  // namespace

namespace {
Tensor matmul_impl(const Tensor& a_in, const Tensor& b_in) {
  detail::check_same_device(a_in, b_in);
  EMBER_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, ValueError,
              "both arguments to matmul need to be at least 1D, but they are ", a_in.dim(), "D and ", b_in.dim(), "D");
  EMBER_CHECK(a_in.dtype() == b_in.dtype(), TypeError,
              "expected m1 and m2 to have the same dtype, but got: ", dtype_name(a_in.dtype()),
              " != ", dtype_name(b_in.dtype()));
  EMBER_CHECK(a_in.dtype() != kBool, TypeError, "\"addmm\" not implemented for 'Bool'");
  if (a_in.dim() >= 3 && b_in.dim() == 2) {
    // As PyTorch: a's batch dims fold into its rows, one [batch * n, k] @ [k, m] product
    // (a copies only where its layout cannot be folded).
    IntList shape(a_in.sizes().begin(), a_in.sizes().end() - 1);
    int64_t rows = 1;
    for (int64_t s : shape) rows *= s;
    shape.push_back(b_in.size(1));
    return matmul_impl(a_in.reshape({rows, a_in.size(-1)}), b_in).view(shape);
  }
  // 1-D operands become matrices and their added dim is dropped from the result (numpy rules).
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  EMBER_CHECK(a.size(-1) == b.size(-2), ValueError, "mat1 and mat2 shapes cannot be multiplied (", a.size(-2), "x",
              a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  IntList a_batch(a.sizes().begin(), a.sizes().end() - 2), b_batch(b.sizes().begin(), b.sizes().end() - 2);
  IntList batch = detail::broadcast_shapes(a_batch, b_batch);
  int64_t batch_numel = 1;
  for (int64_t s : batch) batch_numel *= s;
  int64_t n = a.size(-2), m = b.size(-1);

  Tensor out = detail::empty_on({batch_numel, n, m}, a.dtype(), a.device());
  Tensor a3 = as_batched(a, batch, batch_numel), b3 = as_batched(b, batch, batch_numel);
  KernelCall call{OpKind::Matmul, {detail::make_arg(out)}, {detail::make_arg(a3), detail::make_arg(b3)}};
  // TF32 is a GPU tensor-core mode: cuda devices only; the cpu computes in full float32.
  call.args = detail::kargs::Matmul{a.is_cuda() && a.dtype() == kFloat32 && detail::matmul_allows_tf32(),
                                    std::max<int64_t>(0, blas_math(a))};
  detail::launch(a.device(), call);

  IntList shape = batch;
  if (a_in.dim() > 1) shape.push_back(n);
  if (b_in.dim() > 1) shape.push_back(m);
  return out.view(shape);
}

// PyTorch's node for each case of matmul.
const char* matmul_node_name(const Tensor& a, const Tensor& b) {
  if (a.dim() == 1 && b.dim() == 1) return "DotBackward0";
  if (a.dim() == 2 && b.dim() == 1) return "MvBackward0";
  if (a.dim() == 2 && b.dim() == 2) return "MmBackward0";
  if (a.dim() == 3 && b.dim() == 3) return "BmmBackward0";
  return "MatmulBackward0";
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  return detail::op_entry(
      {detail::AutocastOp::kMatmul, detail::Formula::Matmul, detail::Attrs(detail::NoArgs{}, matmul_node_name(a, b))},
      [](const Tensor& a, const Tensor& b) { return matmul_impl(a, b); }, a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  return detail::op_entry(
      {detail::AutocastOp::kBmm},
      [](const Tensor& a, const Tensor& b) {
        EMBER_CHECK(a.dim() == 3, ValueError, "batch1 must be a 3D tensor");
        EMBER_CHECK(b.dim() == 3, ValueError, "batch2 must be a 3D tensor");
        EMBER_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), ValueError,
                    "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
                    "] but got: [", b.size(0), ", ", b.size(1), "].");
        return matmul(a, b);
      },
      a, b);
}

namespace {
// beta * bias + alpha * product (bias broadcasts to the product, not the reverse).
Tensor scaled_sum(const Tensor& bias, Tensor product, const Scalar& beta, const Scalar& alpha) {
  Tensor expanded = bias.expand(product.sizes());
  const bool unit_alpha = !alpha.is_complex() && alpha.to<double>() == 1.0;
  const bool unit_beta = !beta.is_complex() && beta.to<double>() == 1.0;
  const bool zero_beta = !beta.is_complex() && beta.to<double>() == 0.0;
  if (!unit_alpha) product = product * alpha;
  if (zero_beta) return product;  // as PyTorch: bias is ignored (NaN in it does not propagate)
  return product.add_(unit_beta ? expanded : expanded * beta);
}

// beta * bias + alpha * (a @ b), addmm's and baddbmm's value. float16 and bfloat16 operands:
// the product and the sum in float32, rounded once, as PyTorch's GEMMs with a beta term (cuBLAS,
// oneDNN) round; float16 and bfloat16 values are exact in float32 and in TF32. Except where
// cuBLAS's reduced-precision switches change the product on a cuda device (Note [Matmul math]:
// float16 accumulation, or a reduced-precision reduction over more than one split-k block): then
// the product is matmul's, in its dtype, and the sum float32, rounded once more.
Tensor scaled_product_plus(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta,
                           const Scalar& alpha) {
  if (a.dtype() == kFloat16 || a.dtype() == kBFloat16) {
    const int64_t math = blas_math(a);
    const bool reduced =
        math > 0 && ((math & detail::kMatmulHalfAccumulation) != 0 || a.size(-1) > detail::kSplitKBlock);
    Tensor product = reduced ? matmul(a, b).to(kFloat32) : matmul(a.to(kFloat32), b.to(kFloat32));
    return scaled_sum(bias.to(kFloat32), std::move(product), beta, alpha).to(a.dtype());
  }
  return scaled_sum(bias, matmul(a, b), beta, alpha);
}
}  // namespace

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  auto compute = [&](const Tensor& bias, const Tensor& a, const Tensor& b) {
    EMBER_CHECK(a.dim() == 2, ValueError, "mat1 must be a matrix, got ", a.dim(), "-D tensor");
    EMBER_CHECK(b.dim() == 2, ValueError, "mat2 must be a matrix, got ", b.dim(), "-D tensor");
    detail::check_same_device(bias, a);
    EMBER_CHECK(bias.dtype() == a.dtype() && b.dtype() == a.dtype(), TypeError,
                "self and mat2 must have the same dtype, "
                "but got ",
                detail::scalar_type_name(bias.dtype()), " and ", detail::scalar_type_name(b.dtype()));
    return scaled_product_plus(bias, a, b, beta, alpha);
  };
  // One AddmmBackward0 node, as PyTorch's (not the nodes of the ops it is made of).
  return detail::op_entry({detail::AutocastOp::kAddmm, detail::Formula::Addmm, detail::AddmmArgs{beta, alpha}}, compute,
                          bias, a, b);
}

namespace {
Tensor index_select_impl(const Tensor& a, int64_t dim, const Tensor& index) {
  EMBER_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, TypeError,
              "index_select(): Expected dtype int32 or int64 for index");
  EMBER_CHECK(index.dim() <= 1, IndexError, "index_select(): Index is supposed to be a vector");
  detail::check_same_device(a, index);
  int64_t d = detail::wrap_dim(dim, a.dim());
  EMBER_CHECK(a.dim() > 0 || index.numel() == 1, IndexError,
              "index_select(): Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  IntList shape = a.sizes();
  if (a.dim() > 0) shape[d] = index.numel();
  Tensor out = detail::empty_on(shape, a.dtype(), a.device());
  if (out.numel() == 0 && index.numel() == 0) return out;
  KernelCall call{OpKind::IndexSelect, {detail::make_arg(out)}, {detail::make_arg(a), detail::make_arg(index)}};
  call.args = detail::kargs::Dim{d};
  detail::launch(a.device(), call);
  return out;
}
}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  return detail::op_entry(
      {.formula = detail::Formula::IndexSelect,
       .attrs = detail::DimArgs{a.dim() == 0 ? 0 : detail::wrap_dim(dim, a.dim())}},
      [&](const Tensor& a, const Tensor& index) { return index_select_impl(a, dim, index); }, a, index);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  auto compute = [&](const Tensor& input, const Tensor& batch1, const Tensor& batch2) {
    EMBER_CHECK(batch1.dim() == 3, ValueError, "batch1 must be a 3D tensor");
    EMBER_CHECK(batch2.dim() == 3, ValueError, "batch2 must be a 3D tensor");
    EMBER_CHECK(batch2.size(0) == batch1.size(0) && batch2.size(1) == batch1.size(2), ValueError,
                "Expected size for first two dimensions of batch2 tensor to be: [", batch1.size(0), ", ",
                batch1.size(2), "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
    detail::check_same_device(input, batch1);
    // PyTorch 2's TORCH_META_FUNC(baddbmm), whose dtypes print as C++ type names ("float").
    EMBER_CHECK(input.dtype() == batch1.dtype(), TypeError, "Input dtypes must be the same, got: input ",
                cpp_type_name(input.dtype()), ", batch1: ", cpp_type_name(batch1.dtype()),
                ", batch2: ", cpp_type_name(batch2.dtype()));
    EMBER_CHECK(batch2.dtype() == batch1.dtype(), TypeError, "expected scalar type ",
                detail::scalar_type_name(batch1.dtype()), " but found ", detail::scalar_type_name(batch2.dtype()));
    return scaled_product_plus(input, batch1, batch2, beta, alpha);
  };
  // addmm's formula serves: its backward is written for batched operands too.
  return detail::op_entry({detail::AutocastOp::kBaddbmm, detail::Formula::Addmm,
                           detail::Attrs(detail::AddmmArgs{beta, alpha}, "BaddbmmBackward0")},
                          compute, input, batch1, batch2);
}

Tensor Tensor::matmul(const Tensor& o) const { return ember::matmul(*this, o); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return ember::index_select(*this, dim, index); }

namespace detail {

Tensor matmul_2d_with_tf32(const Tensor& a, const Tensor& b, bool allow_tf32) {
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), ValueError,
              "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(-1), " and ", b.size(0), "x",
              b.size(-1), ")");
  Tensor out = empty_on({1, a.size(0), b.size(1)}, a.dtype(), a.device());
  KernelCall call{OpKind::Matmul, {make_arg(out)}, {make_arg(a.unsqueeze(0)), make_arg(b.unsqueeze(0))}};
  call.args = kargs::Matmul{allow_tf32 && a.is_cuda() && a.dtype() == kFloat32, 0};
  launch(a.device(), call);
  return out.view({a.size(0), b.size(1)});
}

}  // namespace detail
}  // namespace ember
