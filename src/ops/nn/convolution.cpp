// ember::conv1d / conv2d / conv3d: one im2col + matmul convolution for 1, 2 and 3 spatial
// dims on every backend (Note [Convolution spatial dims] in kernels/conv_geometry.h); its
// input and weight gradients as Matmul + Col2Im and Im2Col + Matmul (ops/nn/backward_kernels.h).
//
// Note [Half convolutions]
// float16 and bfloat16 convolutions accumulate their products in float32 on every backend.
// On a GPU (the driver backend: Backend::computes_reduced_floats_natively), as cuDNN's, they
// run in their own dtype: the columns are float16 (bfloat16), each group's GEMM takes float16
// operands with float32 accumulation (cuBLAS's 32F compute type, tensor cores) and rounds its
// product once; the bias is added after, in the output's dtype (a second rounding, as
// PyTorch's cuDNN path adds it); Col2Im sums in float and rounds once. So a float16
// convolution moves half the bytes of a float32 one and uses the half-precision units, instead
// of costing a float32 convolution plus the casts. On the cpu, as oneDNN's, and on emulated
// devices, whose host kernels convert every float16 element in software, the inputs are
// widened to float32 once and the result (bias included) rounded once: there the columns,
// nine or more times the input's size for a 3x3 kernel, would otherwise be converted in every
// product (the emulated float16 CNN step took 1.3x as long that way). Both routes give each
// value within a few of the dtype's ulps of the float32 result (test_conv_nd). Autocast (Note
// [Autocast]) lists convolutions among its lower-precision ops.
//
// Note [Convolution TF32]
// A convolution is one Im2Col KernelCall that unfolds input patches into columns, then
// one Matmul KernelCall per group: out[:, group] = weight[group] @ columns[group] (Note
// [Channel-major columns]). The matmuls are built here rather than through ember::matmul
// because their TF32 switch is backends::cudnn.conv.fp32_precision (cudnn_conv_allows_tf32(),
// which backends::cudnn.allow_tf32 writes), not the matmul precision: a user who turns off
// matmul TF32 but keeps cuDNN's gets TF32 convolutions, as in PyTorch. Both host Matmul (cpu,
// emulated) and the driver's cuBLAS Matmul honour kargs::Matmul::allow_tf32, which is set for
// cuda devices only: the cpu convolves in full float32, as PyTorch's. cuBLAS's
// reduced-precision switches (backends::cuda::matmul.allow_fp16_*) do not reach convolutions
// (PyTorch's run in cuDNN): their Matmul launches carry no math bits (kernels/matmul_math.h).
#include "ember/nn/functional.h"
#include "ember/nn/functional/conv.h"
#include "ops/op_entry.h"

#include <memory>
#include <string>
#include <tuple>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_call.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/nn/backward_kernels.h"
#include "ops/nn/conv_padding.h"
#include "runtime/backend.h"
#include "runtime/backend_flags.h"

namespace ember {
namespace {

// A conv parameter given as one value (applied to every spatial dim) or one per dim.
IntList expand_param(const IntList& values, int64_t dims, const char* name) {
  EMBER_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == dims, ValueError, "expected ", name,
              " to be a single integer value or a list of ", dims,
              " values to match the convolution dimensions, but got ", name, "=", detail::IntListPrinter{values});
  return values.size() == 1 ? IntList(dims, values[0]) : values;
}

detail::TensorArg matrix_arg(const Tensor& base, int64_t offset, IntList sizes, IntList strides) {
  detail::TensorArg arg;
  arg.data = static_cast<char*>(base.impl()->data()) + offset * static_cast<int64_t>(base.element_size());
  arg.dtype = base.dtype();
  arg.sizes = std::move(sizes);
  arg.strides = std::move(strides);
  return arg;
}

// Note [Convolution TF32]: cuDNN's switch, on cuda float32 only.
bool conv_allows_tf32(const Tensor& t) {
  return t.is_cuda() && t.dtype() == kFloat32 && detail::cudnn_conv_allows_tf32();
}

// One operand of a grouped product: a 3-D (batch, rows, cols) strided view of `base`
// starting `group_offset` elements further for each group.
struct GroupOperand {
  const Tensor& base;
  int64_t group_offset;
  IntList sizes, strides;
};

// out[g] = a[g] @ b[g] for g < groups: one Matmul KernelCall per group.
void grouped_matmul(const GroupOperand& a, const GroupOperand& b, const GroupOperand& out, int64_t groups,
                    bool allow_tf32) {
  for (int64_t g = 0; g < groups; ++g) {
    detail::KernelCall product;
    product.op = detail::OpKind::Matmul;
    product.inputs.push_back(matrix_arg(a.base, g * a.group_offset, a.sizes, a.strides));
    product.inputs.push_back(matrix_arg(b.base, g * b.group_offset, b.sizes, b.strides));
    product.outputs.push_back(matrix_arg(out.base, g * out.group_offset, out.sizes, out.strides));
    product.args = detail::kargs::Matmul{allow_tf32, 0};
    detail::launch(out.base.device(), product);
  }
}

// Note [Channel-major columns]
// The columns of a whole batch may be laid out {rows, N, positions} (Im2Col writes them
// through the {N, rows, positions} view), so that each group's product runs over the whole
// batch as one gemm ({C_out/groups, rows/groups} @ {rows/groups, N * positions}) instead
// of one gemm per batch item; the forward result {C_out, N, positions} is then transposed
// into the output with one copy. The gradients always use this layout. The forward keeps
// one product per batch item when each is small (below kSmallProduct multiply-adds, where
// OpenBLAS computes on the calling thread and the cpu Matmul spreads the batch over the
// pool, as LibTorch spreads per-sample gemms): one large product would be split over
// OpenBLAS's threads, whose hand-offs cost more than such a product on a busy machine.
constexpr int64_t kSmallProduct = int64_t{1} << 18;

// Im2Col of `input` into new columns, {rows, N, positions} when channel_major, else
// {N, rows, positions}.
Tensor unfold(const Tensor& input, const detail::ConvGeometry& geometry, bool channel_major) {
  const int64_t batch = input.size(0), positions = geometry.positions();
  const int64_t rows = input.size(1) * geometry.kernel_volume();
  const IntList shape = channel_major ? IntList{rows, batch, positions} : IntList{batch, rows, positions};
  Tensor columns = detail::make_tensor(shape, input.dtype(), input.device());
  detail::KernelCall unfold;
  unfold.op = detail::OpKind::Im2Col;
  unfold.inputs.push_back(detail::make_arg(input));
  unfold.outputs.push_back(
      matrix_arg(columns, 0, {batch, rows, positions},
                 channel_major ? IntList{positions, batch * positions, 1} : IntList{rows * positions, positions, 1}));
  unfold.payload = std::make_shared<detail::ConvGeometry>(geometry);
  detail::launch(input.device(), unfold);
  return columns;
}

// The sizes a convolution of `dims` spatial dims was given, each expanded to one per dim.
struct ConvParams {
  IntList stride, padding, dilation;
  int64_t groups;
};

ConvParams conv_params(int64_t dims, const IntList& stride, const IntList& padding, const IntList& dilation,
                       int64_t groups) {
  return {expand_param(stride, dims, "stride"), expand_param(padding, dims, "padding"),
          expand_param(dilation, dims, "dilation"), groups};
}

// "(3 x 4 x 5)": sizes per channel, as PyTorch's messages print them.
std::string extent_text(const IntList& sizes) {
  std::string text = "(";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? " x " : "") + std::to_string(sizes[d]);
  return text + ")";
}

void check_bias(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t out_channels, const char* name) {
  if (!bias.defined()) return;
  detail::check_same_device(input, bias);
  EMBER_CHECK(bias.dtype() == input.dtype(), TypeError, name, ": input type (", dtype_name(input.dtype()),
              ") and bias type (", dtype_name(bias.dtype()), ") should be the same");
  EMBER_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, ValueError, "Given weight of size ",
              detail::IntListPrinter{weight.sizes()}, ", expected bias to be 1-dimensional with ", out_channels,
              " elements, but got bias of size ", detail::IntListPrinter{bias.sizes()}, " instead");
}

void check_params(const ConvParams& p) {
  for (size_t d = 0; d < p.stride.size(); ++d) {
    EMBER_CHECK(p.stride[d] > 0, ValueError, "non-positive stride is not supported");
    EMBER_CHECK(p.padding[d] >= 0, ValueError, "negative padding is not supported");
    EMBER_CHECK(p.dilation[d] > 0, ValueError, "dilation should be greater than zero");
  }
}

// Checks a batched input {N, C, spatial...} against its weight, bias and params (PyTorch's
// messages) and returns the geometry: spatial dims right-aligned into (depth, height, width).
detail::ConvGeometry checked_geometry(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                      const ConvParams& p, const char* name) {
  const int64_t dims = input.dim() - 2;
  check_params(p);
  const int64_t channels = input.size(1), out_channels = weight.size(0), groups = p.groups;
  EMBER_CHECK(out_channels % groups == 0, ValueError, "Given groups=", groups, ", expected weight to be divisible by ",
              groups, " at dimension 0, but got weight of size ", detail::IntListPrinter{weight.sizes()}, " instead");
  EMBER_CHECK(channels == weight.size(1) * groups, ValueError, "Given groups=", groups, ", weight of size ",
              detail::IntListPrinter{weight.sizes()}, ", expected input", detail::IntListPrinter{input.sizes()},
              " to have ", weight.size(1) * groups, " channels, but got ", channels, " channels instead");
  check_bias(input, weight, bias, out_channels, name);
  IntList padded(dims), span(dims), out(dims);
  bool fits = true;
  for (int64_t d = 0; d < dims; ++d) {
    padded[d] = input.size(2 + d) + 2 * p.padding[d];
    span[d] = p.dilation[d] * (weight.size(2 + d) - 1) + 1;
    fits = fits && span[d] <= padded[d];
    out[d] = (padded[d] - span[d]) / p.stride[d] + 1;
  }
  EMBER_CHECK(fits, ValueError, "Calculated padded input size per channel: ", extent_text(padded),
              ". Kernel size: ", extent_text(span), ". Kernel size can't be greater than actual input size");
  IntList kernel(weight.sizes().begin() + 2, weight.sizes().end());
  return detail::nn::conv_geometry(kernel, p.stride, p.padding, p.dilation, out);
}

Tensor convolution_batched(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p,
                           const char* name) {
  const detail::ConvGeometry geometry = checked_geometry(input, weight, bias, p, name);
  const int64_t dims = input.dim() - 2, groups = p.groups;
  const int64_t batch = input.size(0), channels = input.size(1), out_channels = weight.size(0);
  const Device device = input.device();
  const int64_t positions = geometry.positions(), depth = batch * positions;
  const int64_t rows = channels * geometry.kernel_volume();  // of the columns, all groups
  IntList out_sizes{batch, out_channels};
  const int64_t* positions_of[3] = {&geometry.out_d, &geometry.out_h, &geometry.out_w};
  for (int64_t d = 0; d < dims; ++d) out_sizes.push_back(*positions_of[3 - dims + d]);
  Tensor out = detail::make_tensor(out_sizes, input.dtype(), device);
  if (out.numel() == 0) return out;

  const Tensor w = weight.contiguous();
  const int64_t group_out = out_channels / groups, group_rows = rows / groups;
  const bool allow_tf32 = conv_allows_tf32(input);
  bool direct = input.is_contiguous();  // a 1x1, stride-1, unpadded convolution: the input is its columns
  for (int64_t d = 0; d < dims; ++d)
    direct = direct && weight.size(2 + d) == 1 && p.stride[d] == 1 && p.padding[d] == 0;
  if (direct || group_out * group_rows * positions < kSmallProduct) {  // Note [Channel-major columns]
    // One product per batch item; the group's weight is shared by every item (batch stride 0).
    const Tensor columns = direct ? input : unfold(input, geometry, /*channel_major=*/false);
    grouped_matmul(
        {w, group_out * group_rows, {batch, group_out, group_rows}, {0, group_rows, 1}},
        {columns, group_rows * positions, {batch, group_rows, positions}, {rows * positions, positions, 1}},
        {out, group_out * positions, {batch, group_out, positions}, {out_channels * positions, positions, 1}}, groups,
        allow_tf32);
  } else {
    const Tensor columns = unfold(input, geometry, /*channel_major=*/true);
    Tensor product = batch == 1 ? out : detail::make_tensor({out_channels, batch, positions}, input.dtype(), device);
    grouped_matmul({w, group_out * group_rows, {1, group_out, group_rows}, {0, group_rows, 1}},
                   {columns, group_rows * depth, {1, group_rows, depth}, {0, depth, 1}},
                   {product, group_out * depth, {1, group_out, depth}, {0, depth, 1}}, groups, allow_tf32);
    if (batch != 1) {
      // The transposing copy adds the bias on the way (one pass over the output).
      Tensor out3 = out.view({batch, out_channels, positions});
      if (bias.defined()) {
        detail::KernelCall add{detail::OpKind::Add,
                               {detail::make_arg(out3)},
                               {detail::make_arg(product.transpose(0, 1)),
                                detail::make_arg(bias.view({1, out_channels, 1}), out3.sizes())},
                               detail::kargs::Alpha{1}};
        detail::launch(device, add);
        return out;
      }
      out3.copy_(product.transpose(0, 1));
    }
  }
  if (bias.defined()) out.view({batch, out_channels, positions}).add_(bias.view({1, out_channels, 1}));
  return out;
}

// The transposed convolution of a batched input {N, C_in, spatial...}: the input gradient of
// the convolution {N, C_out, out...} -> {N, C_in, spatial...} with the same weight and
// settings (Matmul + Col2Im, convolution_backward), plus the bias.
Tensor conv_transpose_batched(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p,
                              const IntList& output_padding, const char* name) {
  check_params(p);
  const int64_t dims = input.dim() - 2, groups = p.groups, batch = input.size(0);
  EMBER_CHECK(weight.size(0) % groups == 0, ValueError, "Given groups=", groups,
              ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ",
              detail::IntListPrinter{weight.sizes()}, " instead");
  EMBER_CHECK(input.size(1) == weight.size(0), ValueError, "Given transposed=1, weight of size ",
              detail::IntListPrinter{weight.sizes()}, ", expected input", detail::IntListPrinter{input.sizes()},
              " to have ", weight.size(0), " channels, but got ", input.size(1), " channels instead");
  const int64_t out_channels = weight.size(1) * groups;
  check_bias(input, weight, bias, out_channels, name);
  // PyTorch's messages; a 1-D convolution speaks of height 0 (stride and dilation 1), as
  // PyTorch's runs it as a 2-D one.
  static const char* const kAxes[3] = {"depth", "height", "width"};
  bool small_enough = true;
  std::string sizes_text;
  for (int64_t d = 0; d < dims; ++d)
    small_enough = small_enough && (output_padding[d] < p.stride[d] || output_padding[d] < p.dilation[d]);
  for (const auto& [label, list, one_d] :
       {std::tuple{"output_padding", &output_padding, 0}, std::tuple{"stride", &p.stride, 1},
        std::tuple{"dilation", &p.dilation, 1}}) {
    if (dims == 1) sizes_text += detail::cat(" ", label, "_height: ", one_d);
    for (int64_t d = 0; d < dims; ++d)
      sizes_text += detail::cat(" ", label, "_", kAxes[3 - dims + d], ": ", (*list)[d]);
  }
  EMBER_CHECK(small_enough, ValueError, "output padding must be smaller than either stride or dilation, but got",
              sizes_text);
  IntList out_sizes{batch, out_channels}, positions;
  bool fits = true;
  for (int64_t d = 0; d < dims; ++d) {
    out_sizes.push_back((input.size(2 + d) - 1) * p.stride[d] - 2 * p.padding[d] +
                        p.dilation[d] * (weight.size(2 + d) - 1) + output_padding[d] + 1);
    positions.push_back(input.size(2 + d));
    fits = fits && out_sizes.back() > 0;
  }
  EMBER_CHECK(fits, ValueError, "Given input size per channel: ", extent_text(positions),
              ". Calculated output size per channel: ", extent_text(IntList(out_sizes.begin() + 2, out_sizes.end())),
              ". Output size is too small");
  const IntList kernel(weight.sizes().begin() + 2, weight.sizes().end());
  const detail::ConvGeometry geometry = detail::nn::conv_geometry(kernel, p.stride, p.padding, p.dilation, positions);
  Tensor out = detail::nn::convolution_backward(input, Tensor(), out_sizes, weight, geometry, groups,
                                                /*need_input=*/true, /*need_weight=*/false)
                   .input;
  if (bias.defined() && out.numel() > 0) out.view({batch, out_channels, -1}).add_(bias.view({1, out_channels, 1}));
  return out;
}

// The (transposed) convolution over `dims` spatial dims that conv1d/2d/3d and
// conv_transpose1d/2d/3d name: PyTorch's checks, unbatched input, and the autograd node
// (Formula::Conv2d, PyTorch's ConvolutionBackward0 for every rank and both directions).
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                   const IntList& padding, const IntList& dilation, int64_t groups, int64_t dims, const char* name,
                   const IntList* output_padding = nullptr) {
  auto compute = [&](const Tensor& input, const Tensor& weight, const Tensor& bias) {
    EMBER_CHECK(input.defined() && weight.defined(), ValueError, name, ": expected defined input and weight tensors");
    EMBER_CHECK(input.dim() == dims + 1 || input.dim() == dims + 2, ValueError, "Expected ", dims + 1,
                "D (unbatched) or ", dims + 2, "D (batched) input to ", name,
                ", but got input of size: ", detail::IntListPrinter{input.sizes()});
    EMBER_CHECK(weight.dim() == dims + 2, ValueError, "Expected ", dims + 2, "-dimensional weight for ", input.dim(),
                "-dimensional input ", detail::IntListPrinter{input.sizes()}, ", but got weight of size ",
                detail::IntListPrinter{weight.sizes()}, " instead");
    detail::check_same_device(input, weight);
    EMBER_CHECK(is_floating_point(input.dtype()), TypeError, name, ": expected a floating point input, but got ",
                dtype_name(input.dtype()));
    EMBER_CHECK(weight.dtype() == input.dtype(), TypeError, name, ": input type (", dtype_name(input.dtype()),
                ") and weight type (", dtype_name(weight.dtype()), ") should be the same");
    if ((input.dtype() == kFloat16 || input.dtype() == kBFloat16) &&
        (!input.is_cuda() || !detail::backend().computes_reduced_floats_natively())) {
      // Note [Half convolutions]: through float32, rounded once (the cpu, emulated devices).
      EMBER_CHECK(!bias.defined() || bias.dtype() == input.dtype(), TypeError, name, ": input type (",
                  dtype_name(input.dtype()), ") and bias type (", dtype_name(bias.dtype()), ") should be the same");
      const Tensor bias32 = bias.defined() ? bias.to(kFloat32) : bias;
      return convolution(input.to(kFloat32), weight.to(kFloat32), bias32, stride, padding, dilation, groups, dims, name,
                         output_padding)
          .to(input.dtype());
    }
    EMBER_CHECK(groups > 0, ValueError, "non-positive groups is not supported");
    const ConvParams params = conv_params(dims, stride, padding, dilation, groups);
    const bool transposed = output_padding != nullptr;
    const IntList extra = transposed ? expand_param(*output_padding, dims, "output_padding") : IntList{};
    const bool unbatched = input.dim() == dims + 1;
    Tensor batched = unbatched ? input.unsqueeze(0) : input;
    ember::detail::WindowArgs attrs;
    if (ember::detail::should_record({&batched, &weight, &bias})) {
      // kernel..., stride..., padding..., dilation..., groups, transposed (src/autograd/formulas_conv.cpp).
      for (int64_t d = 0; d < dims; ++d) attrs.geometry.push_back(weight.size(2 + d));
      for (const IntList* list : {&params.stride, &params.padding, &params.dilation})
        attrs.geometry.insert(attrs.geometry.end(), list->begin(), list->end());
      attrs.geometry.push_back(groups);
      attrs.geometry.push_back(transposed ? 1 : 0);
    }
    // Recorded over the batched input, with attrs built only when recording: a second door.
    Tensor out = ember::detail::op_entry(
        {.formula = ember::detail::Formula::Conv2d, .attrs = std::move(attrs)},
        [&](const Tensor& batched, const Tensor& weight, const Tensor& bias) {
          return transposed ? conv_transpose_batched(batched, weight, bias, params, extra, name)
                            : convolution_batched(batched, weight, bias, params, name);
        },
        batched, weight, bias);
    return unbatched ? out.squeeze(0) : out;
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kConvolution}, compute, input, weight, bias);
}

// padding=kValid or kSame: PyTorch's _convolution_mode. "same" pads each dim by
// dilation * (kernel - 1) in all, half on each side; an odd total puts the extra element on
// the right, by padding the input with zeros there first.
Tensor convolution_mode(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                        nn::ConvPaddingTag padding, const IntList& dilation, int64_t groups, int64_t dims,
                        const char* name) {
  if (padding == nn::kValid) return convolution(input, weight, bias, stride, {0}, dilation, groups, dims, name);
  const IntList strides = expand_param(stride, dims, "stride"), dilations = expand_param(dilation, dims, "dilation");
  for (int64_t s : strides) EMBER_CHECK(s == 1, ValueError, "padding='same' is not supported for strided convolutions");
  EMBER_CHECK(weight.defined() && weight.dim() == dims + 2, ValueError, "Expected ", dims + 2,
              "-dimensional weight for ", name, ", but got weight of size ",
              detail::IntListPrinter{weight.defined() ? weight.sizes() : IntList{}}, " instead");
  IntList symmetric(dims), extra_right;  // F::pad order: last dim first
  bool asymmetric = false;
  for (int64_t d = 0; d < dims; ++d) {
    const int64_t total = dilations[d] * (weight.size(2 + d) - 1);
    symmetric[d] = total / 2;
    asymmetric = asymmetric || total % 2 != 0;
  }
  if (!asymmetric) return convolution(input, weight, bias, stride, symmetric, dilation, groups, dims, name);
  for (int64_t d = dims - 1; d >= 0; --d) {
    extra_right.push_back(0);
    extra_right.push_back(dilations[d] * (weight.size(2 + d) - 1) % 2);
  }
  return convolution(detail::nn::pad_spatial(input, extra_right, "zeros"), weight, bias, stride, symmetric, dilation,
                     groups, dims, name);
}

}  // namespace

namespace detail::nn {

ConvGeometry conv_geometry(const IntList& kernel, const IntList& stride, const IntList& padding,
                           const IntList& dilation, const IntList& out) {
  // Dim d of `dims` is slot 3 - dims + d of (depth, height, width).
  const auto dims = static_cast<int64_t>(kernel.size());
  ConvGeometry g;
  int64_t* kernels[3] = {&g.kernel_d, &g.kernel_h, &g.kernel_w};
  int64_t* strides[3] = {&g.stride_d, &g.stride_h, &g.stride_w};
  int64_t* pads[3] = {&g.pad_d, &g.pad_h, &g.pad_w};
  int64_t* dilations[3] = {&g.dilation_d, &g.dilation_h, &g.dilation_w};
  int64_t* positions[3] = {&g.out_d, &g.out_h, &g.out_w};
  g.out_h = g.out_w = 1;
  for (int64_t d = 0; d < dims; ++d) {
    const int64_t slot = 3 - dims + d;
    *kernels[slot] = kernel[d];
    *strides[slot] = stride[d];
    *pads[slot] = padding[d];
    *dilations[slot] = dilation[d];
    *positions[slot] = out[d];
  }
  return g;
}

ConvGrads convolution_backward(const Tensor& grad_output, const Tensor& input, const IntList& input_sizes,
                               const Tensor& weight, const ConvGeometry& geometry, int64_t groups, bool need_input,
                               bool need_weight) {
  const Device device = grad_output.device();
  const TensorOptions options = TensorOptions(grad_output.dtype()).device(device);
  const int64_t batch = input_sizes[0], positions = geometry.positions(), depth = batch * positions;
  const int64_t rows = input_sizes[1] * geometry.kernel_volume();
  const int64_t out_channels = weight.size(0), group_out = out_channels / groups, group_rows = rows / groups;
  ConvGrads grads;
  if (grad_output.numel() == 0) {
    if (need_input) grads.input = zeros(input_sizes, options);
    if (need_weight) grads.weight = zeros(weight.sizes(), options);
    return grads;
  }
  const bool allow_tf32 = conv_allows_tf32(grad_output);
  // Note [Channel-major columns]: the output gradient as {C_out, N * positions}.
  const Tensor go = grad_output.transpose(0, 1).contiguous();
  if (need_input) {
    const Tensor w = weight.contiguous();
    Tensor columns = make_tensor({rows, batch, positions}, go.dtype(), device);
    grouped_matmul({w, group_out * group_rows, {1, group_rows, group_out}, {0, 1, group_rows}},  // weight[group]^T
                   {go, group_out * depth, {1, group_out, depth}, {0, depth, 1}},
                   {columns, group_rows * depth, {1, group_rows, depth}, {0, depth, 1}}, groups, allow_tf32);
    grads.input = make_tensor(input_sizes, go.dtype(), device);
    KernelCall fold;
    fold.op = OpKind::Col2Im;
    fold.inputs.push_back(matrix_arg(columns, 0, {batch, rows, positions}, {positions, depth, 1}));
    fold.outputs.push_back(make_arg(grads.input));
    fold.payload = std::make_shared<ConvGeometry>(geometry);
    launch(device, fold);
  }
  if (need_weight) {
    const Tensor columns = unfold(input, geometry, /*channel_major=*/true);
    grads.weight = make_tensor(weight.sizes(), go.dtype(), device);
    grouped_matmul({go, group_out * depth, {1, group_out, depth}, {0, depth, 1}},
                   {columns, group_rows * depth, {1, depth, group_rows}, {0, 1, depth}},  // columns[group]^T
                   {grads.weight, group_out * group_rows, {1, group_out, group_rows}, {0, group_rows, 1}}, groups,
                   allow_tf32);
  }
  return grads;
}

}  // namespace detail::nn

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return convolution(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d");
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return convolution(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d");
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return convolution(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d");
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation, int64_t groups) {
  return convolution_mode(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d");
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation, int64_t groups) {
  return convolution_mode(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d");
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation, int64_t groups) {
  return convolution_mode(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d");
}

#define EMBER_CONV_TRANSPOSE(dims)                                                                                     \
  Tensor conv_transpose##dims##d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride, \
                                 const IntList& padding, const IntList& output_padding, int64_t groups,                \
                                 const IntList& dilation) {                                                            \
    return convolution(input, weight, bias, stride, padding, dilation, groups, dims, "conv_transpose" #dims "d",       \
                       &output_padding);                                                                               \
  }
EMBER_CONV_TRANSPOSE(1)
EMBER_CONV_TRANSPOSE(2)
EMBER_CONV_TRANSPOSE(3)
#undef EMBER_CONV_TRANSPOSE

}  // namespace ember
