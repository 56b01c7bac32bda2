// ember::fft (torch.fft): argument checks, dtype promotion, trimming/padding, and one
// KernelCall{FFT} per transform through the launch choke point.
//
// Every transform is reduced to one canonical geometry before planning: the
// transformed dims are permuted last and the data made contiguous, so a plan is keyed
// by (batch, signal sizes, kind, direction, precision) with dense strides, and the same
// plan serves fft(x, dim=0) and fft(x.t(), dim=1). The result is the contiguous output
// permuted back, a view with the input's dim order (PyTorch also returns restrided
// outputs). Normalization is applied by the kernel (kargs::Fft::scale), fused with the
// transform's output pass.
#include "ember/fft.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "fft/plan_cache.h"
#include "kernels/kernel_call.h"
#include "ops/launch.h"
#include "ops/recording.h"

namespace ember::fft {
namespace {

using detail::fft::PlanKey;
using detail::fft::TransformKind;

enum class Norm { Backward, Forward, Ortho };

Norm parse_norm(const std::string& norm) {
  if (norm == "backward") return Norm::Backward;
  if (norm == "forward") return Norm::Forward;
  if (norm == "ortho") return Norm::Ortho;
  detail::fail<ValueError>("Invalid normalization mode: \"", norm, "\"");
}

// PyTorch's factor for a transform over `n` points: "backward" scales the inverse,
// "forward" the forward transform, "ortho" both by 1/sqrt(n).
double norm_scale(Norm norm, bool forward, int64_t n) {
  switch (norm) {
    case Norm::Backward: return forward ? 1.0 : 1.0 / static_cast<double>(n);
    case Norm::Forward: return forward ? 1.0 / static_cast<double>(n) : 1.0;
    case Norm::Ortho: return 1.0 / std::sqrt(static_cast<double>(n));
  }
  return 1.0;
}

void check_defined(const Tensor& input, const char* op) {
  EMBER_CHECK(input.defined(), ValueError, op, ": expected a defined tensor");
}

// wrap_dim lets a 0-dim tensor take dims 0 and -1; a transform needs a real dimension.
int64_t wrap_fft_dim(int64_t dim, const Tensor& input) {
  EMBER_CHECK(input.dim() > 0, IndexError, "Dimension specified as ", dim, " but tensor has no dimensions");
  return detail::wrap_dim(dim, input.dim());
}

void check_points(int64_t n) { EMBER_CHECK(n >= 1, ValueError, "Invalid number of data points (", n, ") specified"); }

// PyTorch's promote_type_fft: integers and bool compute in the default dtype, complex
// stays, half and bfloat16 are not supported by the host (FFTW) or our cuFFT plans.
DType real_compute_dtype(DType dtype) {
  if (is_complex(dtype)) dtype = to_real(dtype);
  if (!is_floating_point(dtype)) return default_dtype();
  EMBER_CHECK(dtype == kFloat32 || dtype == kFloat64, TypeError, "Unsupported dtype ", dtype_name(dtype));
  return dtype;
}

DType complex_compute_dtype(DType dtype) { return to_complex(real_compute_dtype(dtype)); }

// `x` with size `n` along `dim`: trimmed, or zero-padded at the end.
Tensor resize_dim(const Tensor& x, int64_t dim, int64_t n) {
  const int64_t current = x.size(dim);
  if (current == n) return x;
  if (current > n) return x.narrow(dim, 0, n);
  IntList shape = x.sizes();
  shape[static_cast<size_t>(dim)] = n - current;
  // cat, not a copy into a slice, so that the padding is differentiable.
  return cat({x, zeros(shape, TensorOptions(x.dtype()).device(x.device()))}, dim);
}

int64_t product(const IntList& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{1}, std::multiplies<>());
}

detail::TensorArg arg_of(const Tensor& t, int64_t batch, const IntList& signal_sizes) {
  detail::TensorArg arg;
  arg.data = t.impl()->data();  // not a host access: the launch is
  arg.dtype = t.dtype();
  arg.sizes = {batch};
  for (int64_t s : signal_sizes) arg.sizes.push_back(s);
  arg.strides = detail::contiguous_strides(arg.sizes);
  return arg;
}

// Runs one transform over `dims` (wrapped, distinct) of `x`, which already has the compute
// dtype and the transform's input sizes along `dims`. `user_input` is what the caller
// passed: a C2R transform overwrites its input, so it must never run on the user's memory.
Tensor execute(const Tensor& x, const Tensor& user_input, const IntList& dims, TransformKind kind, bool forward,
               const IntList& signal_sizes, double scale) {
  const int64_t ndim = x.dim();
  IntList perm;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  const size_t batch_rank = perm.size();
  perm.insert(perm.end(), dims.begin(), dims.end());

  Tensor in = x.permute(perm).contiguous();
  if (kind == TransformKind::C2R && in.impl()->storage() == user_input.impl()->storage()) in = in.clone();

  PlanKey key;
  key.kind = kind;
  key.forward = forward;
  key.precision = to_real(in.dtype());
  key.signal_sizes = signal_sizes;
  const IntList in_sizes = key.in_sizes(), out_sizes = key.out_sizes();
  key.in_strides = detail::contiguous_strides(in_sizes);
  key.out_strides = detail::contiguous_strides(out_sizes);
  key.in_dist = product(in_sizes);
  key.out_dist = product(out_sizes);
  IntList out_shape(in.sizes().begin(), in.sizes().begin() + static_cast<int64_t>(batch_rank));
  key.batch = product(out_shape);
  out_shape.insert(out_shape.end(), out_sizes.begin(), out_sizes.end());

  const DType out_dtype = kind == TransformKind::C2R ? to_real(in.dtype()) : to_complex(in.dtype());
  const Device device = in.device();
  Tensor out = detail::make_tensor(out_shape, out_dtype, device);

  IntList inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  if (out.numel() == 0) return out.permute(inverse);

  detail::KernelCall call;
  call.op = detail::OpKind::FFT;
  call.inputs.push_back(arg_of(in, key.batch, in_sizes));
  call.outputs.push_back(arg_of(out, key.batch, out_sizes));
  call.args = detail::kargs::Fft{scale};
  call.device = device.is_cuda() ? device.index() : -1;
  call.payload = device.is_cuda() ? detail::fft::device_plan_cache(device.index()).get(key)
                                  : detail::fft::host_plan_cache().get(key);
  detail::launch(device, call);
  if (ember::detail::should_record(in)) {
    using ember::detail::FftArgs;
    FftArgs args{signal_sizes,
                 kind == TransformKind::C2C   ? FftArgs::C2C
                 : kind == TransformKind::R2C ? FftArgs::R2C
                                              : FftArgs::C2R,
                 forward, scale};
    ember::detail::Attrs attrs(std::move(args), kind == TransformKind::C2C   ? "FftC2CBackward0"
                                                : kind == TransformKind::R2C ? "FftR2CBackward0"
                                                                             : "FftC2RBackward0");
    ember::detail::record(ember::detail::Formula::FFT, {in}, out, std::move(attrs));
  }
  return out.permute(inverse);
}

// fft / ifft / fft2 / ifft2 over `dims` with optional sizes `s` (-1: keep the input's).
Tensor c2c(const char* op, const Tensor& input, const std::optional<IntList>& s, const IntList& dim_list,
           const std::string& norm, bool forward) {
  check_defined(input, op);
  const Norm mode = parse_norm(norm);
  EMBER_CHECK(!s || s->size() == dim_list.size(), ValueError,
              "When given, dim and shape arguments must have the same length");
  EMBER_CHECK(dim_list.size() <= 3, ValueError, op, ": at most 3 dims can be transformed at once, but got ",
              dim_list.size());
  IntList dims;
  for (int64_t d : dim_list) dims.push_back(wrap_fft_dim(d, input));
  IntList sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  EMBER_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), ValueError, "FFT dims must be unique");

  Tensor x = input.to(complex_compute_dtype(input.dtype()));
  IntList signal_sizes;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = s && (*s)[i] != -1 ? (*s)[i] : input.size(dims[i]);
    check_points(n);
    x = resize_dim(x, dims[i], n);
    signal_sizes.push_back(n);
  }
  if (dims.empty()) return x.clone();
  return execute(x, input, dims, TransformKind::C2C, forward, signal_sizes,
                 norm_scale(mode, forward, product(signal_sizes)));
}

}  // namespace

Tensor fft(const Tensor& input, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  std::optional<IntList> s;
  if (n) s = IntList{*n};
  return c2c("fft", input, s, {dim}, norm, /*forward=*/true);
}

Tensor ifft(const Tensor& input, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  std::optional<IntList> s;
  if (n) s = IntList{*n};
  return c2c("ifft", input, s, {dim}, norm, /*forward=*/false);
}

Tensor fft2(const Tensor& input, std::optional<IntList> s, IntList dim, const std::string& norm) {
  return c2c("fft2", input, s, dim, norm, /*forward=*/true);
}

Tensor ifft2(const Tensor& input, std::optional<IntList> s, IntList dim, const std::string& norm) {
  return c2c("ifft2", input, s, dim, norm, /*forward=*/false);
}

Tensor rfft(const Tensor& input, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  check_defined(input, "rfft");
  const Norm mode = parse_norm(norm);
  EMBER_CHECK(!is_complex(input.dtype()), TypeError, "rfft expects a real input tensor, but got ",
              dtype_name(input.dtype()));
  const int64_t d = wrap_fft_dim(dim, input);
  const int64_t points = n.value_or(input.size(d));
  check_points(points);
  Tensor x = resize_dim(input.to(real_compute_dtype(input.dtype())), d, points);
  return execute(x, input, {d}, TransformKind::R2C, /*forward=*/true, {points}, norm_scale(mode, true, points));
}

Tensor irfft(const Tensor& input, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  check_defined(input, "irfft");
  const Norm mode = parse_norm(norm);
  const int64_t d = wrap_fft_dim(dim, input);
  const int64_t points = n.value_or(2 * (input.size(d) - 1));
  check_points(points);
  // A real signal of `points` samples has points/2+1 independent frequencies.
  Tensor x = resize_dim(input.to(complex_compute_dtype(input.dtype())), d, points / 2 + 1);
  return execute(x, input, {d}, TransformKind::C2R, /*forward=*/false, {points}, norm_scale(mode, false, points));
}

}  // namespace ember::fft
