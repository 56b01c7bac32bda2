// ember::conv2d: im2col + matmul on every backend; its input and weight gradients as
// Matmul + Col2Im and Im2Col + Matmul (ops/nn/backward_kernels.h).
//
// Note [Convolution TF32]
// A convolution is one Im2Col KernelCall that unfolds input patches into columns, then
// one Matmul KernelCall per group: out[:, group] = weight[group] @ columns[group] (Note
// [Channel-major columns]). The matmuls are built here rather than through ember::matmul
// because their TF32 switch is backends.cudnn.allow_tf32 (cudnn_allows_tf32()), not the
// matmul precision: a user who turns off matmul TF32 but keeps cuDNN's gets TF32
// convolutions, as in PyTorch. Both host Matmul (cpu, emulated) and the driver's cuBLAS Matmul honour KernelCall::allow_tf32,
// which is set for cuda devices only: the cpu convolves in full float32, as PyTorch's.
#include "ops/recording.h"
#include "ember/nn.h"

#include <memory>

#include "runtime/backend_flags.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "kernels/kernel_call.h"
#include "ops/nn/backward_kernels.h"
#include "kernels/conv_geometry.h"
#include "ops/launch.h"

namespace ember {
namespace {

// A conv parameter given as one value (applied to both dims) or two.
std::pair<int64_t, int64_t> pair_param(const IntList& values, const char* name) {
  EMBER_CHECK(values.size() == 1 || values.size() == 2, ValueError, "expected ", name,
              " to be a single integer value or a list of 2 values to match the convolution dimensions, but got ",
              name, "=", detail::IntListPrinter{values});
  return values.size() == 1 ? std::pair{values[0], values[0]} : std::pair{values[0], values[1]};
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
bool conv_allows_tf32(const Tensor& t) { return t.is_cuda() && t.dtype() == kFloat32 && detail::cudnn_allows_tf32(); }

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
    product.allow_tf32 = allow_tf32;
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
Tensor unfold(const Tensor& input, const detail::nn::ConvGeometry& geometry, bool channel_major) {
  const int64_t batch = input.size(0), positions = geometry.out_h * geometry.out_w;
  const int64_t rows = input.size(1) * geometry.kernel_h * geometry.kernel_w;
  const IntList shape = channel_major ? IntList{rows, batch, positions} : IntList{batch, rows, positions};
  Tensor columns = detail::make_tensor(shape, input.dtype(), input.device());
  detail::KernelCall unfold;
  unfold.op = detail::OpKind::Im2Col;
  unfold.inputs.push_back(detail::make_arg(input));
  unfold.outputs.push_back(matrix_arg(columns, 0, {batch, rows, positions},
                                      channel_major ? IntList{positions, batch * positions, 1}
                                                    : IntList{rows * positions, positions, 1}));
  unfold.payload = std::make_shared<detail::nn::ConvGeometry>(geometry);
  detail::launch(input.device(), unfold);
  return columns;
}

Tensor conv2d_batched(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                      const IntList& padding, const IntList& dilation, int64_t groups) {
  const auto [stride_h, stride_w] = pair_param(stride, "stride");
  const auto [pad_h, pad_w] = pair_param(padding, "padding");
  const auto [dilation_h, dilation_w] = pair_param(dilation, "dilation");
  EMBER_CHECK(stride_h > 0 && stride_w > 0, ValueError, "non-positive stride is not supported");
  EMBER_CHECK(pad_h >= 0 && pad_w >= 0, ValueError, "negative padding is not supported");
  EMBER_CHECK(dilation_h > 0 && dilation_w > 0, ValueError, "dilation should be greater than zero");

  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  const int64_t out_channels = weight.size(0), kernel_h = weight.size(2), kernel_w = weight.size(3);
  EMBER_CHECK(out_channels % groups == 0, ValueError, "Given groups=", groups, ", expected weight to be divisible by ",
              groups, " at dimension 0, but got weight of size ", detail::IntListPrinter{weight.sizes()}, " instead");
  EMBER_CHECK(channels == weight.size(1) * groups, ValueError, "Given groups=", groups, ", weight of size ",
              detail::IntListPrinter{weight.sizes()}, ", expected input", detail::IntListPrinter{input.sizes()}, " to have ",
              weight.size(1) * groups, " channels, but got ", channels, " channels instead");
  if (bias.defined()) {
    detail::check_same_device(input, bias);
    EMBER_CHECK(bias.dtype() == input.dtype(), TypeError, "conv2d: input type (", dtype_name(input.dtype()),
                ") and bias type (", dtype_name(bias.dtype()), ") should be the same");
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, ValueError, "Given weight of size ",
                detail::IntListPrinter{weight.sizes()}, ", expected bias to be 1-dimensional with ", out_channels,
                " elements, but got bias of size ", detail::IntListPrinter{bias.sizes()}, " instead");
  }
  const int64_t padded_h = height + 2 * pad_h, padded_w = width + 2 * pad_w;
  const int64_t span_h = dilation_h * (kernel_h - 1) + 1, span_w = dilation_w * (kernel_w - 1) + 1;
  EMBER_CHECK(span_h <= padded_h && span_w <= padded_w, ValueError,
              "Calculated padded input size per channel: (", padded_h, " x ", padded_w, "). Kernel size: (", span_h,
              " x ", span_w, "). Kernel size can't be greater than actual input size");

  const detail::nn::ConvGeometry geometry{kernel_h,   kernel_w,   stride_h, stride_w, pad_h, pad_w,
                                          dilation_h, dilation_w, (padded_h - span_h) / stride_h + 1,
                                          (padded_w - span_w) / stride_w + 1};
  const Device device = input.device();
  const int64_t positions = geometry.out_h * geometry.out_w, depth = batch * positions;
  const int64_t rows = channels * kernel_h * kernel_w;  // of the columns, all groups
  Tensor out = detail::make_tensor({batch, out_channels, geometry.out_h, geometry.out_w}, input.dtype(), device);
  if (out.numel() == 0) return out;

  const Tensor w = weight.contiguous();
  const int64_t group_out = out_channels / groups, group_rows = rows / groups;
  const bool allow_tf32 = conv_allows_tf32(input);
  const bool direct = kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0 &&
                      input.is_contiguous();
  if (direct || group_out * group_rows * positions < kSmallProduct) {  // Note [Channel-major columns]
    // One product per batch item; the group's weight is shared by every item (batch stride
    // 0). A 1x1, stride-1, unpadded convolution needs no unfolding: the input is its columns.
    const Tensor columns = direct ? input : unfold(input, geometry, /*channel_major=*/false);
    grouped_matmul({w, group_out * group_rows, {batch, group_out, group_rows}, {0, group_rows, 1}},
                   {columns, group_rows * positions, {batch, group_rows, positions}, {rows * positions, positions, 1}},
                   {out, group_out * positions, {batch, group_out, positions},
                    {out_channels * positions, positions, 1}},
                   groups, allow_tf32);
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
                               1};
        detail::launch(device, add);
        return out;
      }
      out3.copy_(product.transpose(0, 1));
    }
  }
  if (bias.defined()) out.add_(bias.view({1, out_channels, 1, 1}));
  return out;
}

}  // namespace

namespace detail::nn {

ConvGrads conv2d_backward(const Tensor& grad_output, const Tensor& input, const IntList& input_sizes,
                          const Tensor& weight, const ConvGeometry& geometry, int64_t groups, bool need_input,
                          bool need_weight) {
  const Device device = grad_output.device();
  const TensorOptions options = TensorOptions(grad_output.dtype()).device(device);
  const int64_t batch = input_sizes[0], positions = geometry.out_h * geometry.out_w, depth = batch * positions;
  const int64_t rows = input_sizes[1] * geometry.kernel_h * geometry.kernel_w;
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

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  EMBER_CHECK(input.defined() && weight.defined(), ValueError, "conv2d: expected defined input and weight tensors");
  EMBER_CHECK(input.dim() == 3 || input.dim() == 4, ValueError,
              "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: ",
              detail::IntListPrinter{input.sizes()});
  EMBER_CHECK(weight.dim() == 4, ValueError, "Expected 4-dimensional weight for ", input.dim(),
              "-dimensional input ", detail::IntListPrinter{input.sizes()}, ", but got weight of size ", detail::IntListPrinter{weight.sizes()},
              " instead");
  detail::check_same_device(input, weight);
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, TypeError,
              "conv2d: expected a float32 or float64 input, but got ", dtype_name(input.dtype()));
  EMBER_CHECK(weight.dtype() == input.dtype(), TypeError, "conv2d: input type (", dtype_name(input.dtype()),
              ") and weight type (", dtype_name(weight.dtype()), ") should be the same");
  EMBER_CHECK(groups > 0, ValueError, "non-positive groups is not supported");
  Tensor batched = input.dim() == 3 ? input.unsqueeze(0) : input;
  ember::detail::WindowArgs attrs;
  if (ember::detail::should_record({&batched, &weight, &bias})) {
    const auto [stride_h, stride_w] = pair_param(stride, "stride");
    const auto [pad_h, pad_w] = pair_param(padding, "padding");
    const auto [dilation_h, dilation_w] = pair_param(dilation, "dilation");
    attrs.geometry = {weight.size(2), weight.size(3), stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
  }
  Tensor out = ember::detail::recorded(
      ember::detail::Formula::Conv2d, {&batched, &weight, &bias},
      [&] { return conv2d_batched(batched, weight, bias, stride, padding, dilation, groups); }, std::move(attrs));
  return input.dim() == 3 ? out.squeeze(0) : out;
}

}  // namespace ember
