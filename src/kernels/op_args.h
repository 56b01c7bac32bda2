// The typed arguments of a launch: one struct per argument shape, named by an op's row in
// the op list (kernels/op_list.h).
//
// Note [Typed kernel arguments]
// Every row of the op list names the struct its launches carry (kargs::None for most);
// a KernelCall holds it in `args`, an OpArgs, and a kernel reads it with
// `call.arg<kargs::Dim>().dim`. OpArgs is a std::variant of these structs: each is plain
// data (trivially copyable), so the variant is too, and copying a KernelCall onto an emulated
// stream's queue copies it as bytes. Reading the wrong struct is an internal error naming the
// op and both structs; detail::launch checks that a launch carries its row's struct before it
// reaches a backend (check_args in kernels/op_list.h), so a kernel's read cannot fail for a
// launch the op layer made. A new shape of argument is a new struct here and its name in the
// variant; a new op of an existing shape needs nothing here.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>

#include "ember/scalar.h"

namespace ember::detail {

enum class OpKind : uint8_t;  // kernels/kernel_call.h

namespace kargs {

struct None {};
/// Add, Sub: out = in0 +- alpha * in1.
struct Alpha {
  Scalar alpha;
};
/// Fill and the tensor-scalar ops (AddScalar, MulScalar, PowScalar, RSubScalar, RDivScalar).
struct Value {
  Scalar value;
};
/// IsClose: |in0 - in1| <= atol + rtol * |in1|.
struct IsClose {
  Scalar atol, rtol;
  bool equal_nan = false;
};
/// The ops along one dim of in0; -1: all elements (reductions, arg-reductions), where the row says so.
/// The reductions (EMBER_REDUCE_OPS) also reduce, in the same pass, every dim d < 64 whose bit
/// (1 << d) is set in `more` (the op layer's sum and mean over a list of dims).
struct Dim {
  int64_t dim = -1;
  uint64_t more = 0;
};
/// Sort: along dim, stable; descending puts the largest first (NaN largest).
struct Sort {
  int64_t dim = -1;
  bool descending = false;
};
/// Multinomial.
struct Multinomial {
  bool replacement = false;
};
/// Normal: mean, std.
struct Normal {
  Scalar mean, std;
};
/// Uniform: [from, to).
struct Uniform {
  Scalar from, to;
};
/// Arange: out[i] = start + i * step.
struct Arange {
  Scalar start, step;
};
/// Clamp: which of in1 (lower) and in2 (upper) is a bound.
struct Clamp {
  bool has_min = false, has_max = false;
};
/// ClampScalar: the bounds that are set.
struct ClampScalar {
  Scalar min, max;
  bool has_min = false, has_max = false;
};
/// NllLoss: the target that is ignored; the reduction (0 none, 1 sum, 2 mean; loss_kernels.h).
struct NllLoss {
  int64_t ignore_index = -100;
  int64_t reduction = 0;
};
/// LayerNorm, LayerNormBackward: which optional operands are present (kLayerNorm* bits of
/// transformer_kernels.h) and eps (the forward's).
struct LayerNorm {
  int64_t parts = 0;
  double eps = 0;
};
/// Gelu, GeluBackward: the tanh approximation or the exact erf form.
struct Gelu {
  bool tanh = false;
};
/// Triangle: keeps column - row >= diagonal (upper, triu) or <= diagonal (tril).
struct Triangle {
  int64_t diagonal = 0;
  bool upper = false;
};
/// IndexAdd: out (read and written) += alpha * source at index along dim.
struct IndexAdd {
  int64_t dim = 0;
  Scalar alpha;
};
/// AmpUpdateScale: torch._amp_update_scale_'s factors and interval.
struct AmpUpdateScale {
  double growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};
/// GridSample, GridSampleBackward: the modes (GridInterpolation, GridPadding of
/// grid_sample_kernels.h) and align_corners.
struct GridSample {
  uint8_t interpolation = 0, padding = 0;
  bool align_corners = false;
};
/// Matmul: TF32 for float32 operands; the reduced-precision bits (kMatmul* of matmul_math.h)
/// for float16 / bfloat16 ones.
struct Matmul {
  bool allow_tf32 = false;
  int64_t math = 0;
};
/// FFT: the normalisation's factor, applied to the output.
struct Fft {
  double scale = 1.0;
};

}  // namespace kargs

using ArgsVariant = std::variant<kargs::None, kargs::Alpha, kargs::Value, kargs::IsClose, kargs::Dim, kargs::Sort,
                                 kargs::Multinomial, kargs::Normal, kargs::Uniform, kargs::Arange, kargs::Clamp,
                                 kargs::ClampScalar, kargs::NllLoss, kargs::LayerNorm, kargs::Gelu, kargs::Triangle,
                                 kargs::IndexAdd, kargs::AmpUpdateScale, kargs::GridSample, kargs::Matmul, kargs::Fft>;

/// The position of T in ArgsVariant (for the op list's static checks).
template <typename T, size_t I = 0>
constexpr size_t kernel_args_index() {
  static_assert(I < std::variant_size_v<ArgsVariant>, "not a kernel argument struct (kernels/op_args.h)");
  if constexpr (std::is_same_v<std::variant_alternative_t<I, ArgsVariant>, T>) return I;
  else return kernel_args_index<T, I + 1>();
}
template <typename T>
concept KernelArgs = []<size_t... I>(std::index_sequence<I...>) {
  return (std::is_same_v<T, std::variant_alternative_t<I, ArgsVariant>> || ...);
}
(std::make_index_sequence<std::variant_size_v<ArgsVariant>>{});

/// "kargs::Dim", ...: for internal errors.
const char* args_name(size_t index) noexcept;

/// A launch's arguments (Note [Typed kernel arguments]): made only from one of the structs
/// above (a Scalar or an integer where a struct is expected does not compile).
class OpArgs {
 public:
  OpArgs() noexcept = default;
  template <KernelArgs T>
  OpArgs(const T& args) noexcept : v_(args) {}  // NOLINT: implicit, as the struct it holds

  size_t index() const noexcept { return v_.index(); }
  /// The arguments, which must be a T (an internal error naming `op` and both structs otherwise).
  template <typename T>
  const T& get(OpKind op) const {
    if (const T* p = std::get_if<T>(&v_)) [[likely]]
      return *p;
    wrong_args(op, kernel_args_index<T>());
  }

 private:
  [[noreturn]] void wrong_args(OpKind op, size_t expected) const;
  ArgsVariant v_;
};
static_assert(std::is_trivially_copyable_v<ArgsVariant>, "kernel arguments must copy as bytes");

}  // namespace ember::detail
