// Grid sampling's launches (grid_sample.h): PyTorch's aten::grid_sampler checks, then one
// KernelCall (contracts in kernels/grid_sample_kernels.h).
//
// float16 and bfloat16 (PyTorch 2.x's kernels take both, on the cpu and cuda) run through float32:
// the input and grid widened once, the result rounded once. PyTorch's kernels compute in float
// (opmath) over half storage, so the forward's values are the same; the input gradient here is
// summed in float and rounded once, where PyTorch's CUDA kernel adds each tap atomically in half.
#include "ops/nn/grid_sample.h"

#include <sstream>
#include <string>

#include "ember/errors.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/grid_sample_kernels.h"
#include "ops/launch.h"

namespace ember::detail {
namespace {

std::string sizes_text(const IntList& sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

// ATen prints a dtype's caffe2 name in these messages ("float", "double").
const char* caffe2_name(DType dtype) {
  if (dtype == kFloat32) return "float";
  if (dtype == kFloat64) return "double";
  if (dtype == kFloat16) return "c10::Half";
  if (dtype == kBFloat16) return "c10::BFloat16";
  if (dtype == kInt64) return "long int";
  if (dtype == kInt32) return "int";
  return dtype_name(dtype);
}

KernelCall grid_call(OpKind op, int64_t interpolation, int64_t padding, bool align_corners) {
  return KernelCall{
      op,
      {},
      {},
      grid_args(static_cast<GridInterpolation>(interpolation), static_cast<GridPadding>(padding), align_corners)};
}

bool is_reduced_float(DType dtype) { return dtype == kFloat16 || dtype == kBFloat16; }

}  // namespace

void check_grid_sampler(const Tensor& input, const Tensor& grid, int64_t interpolation) {
  EMBER_CHECK(input.defined(), ValueError, "grid_sampler(): expected input to not be undefined");
  EMBER_CHECK(grid.defined(), ValueError, "grid_sampler(): expected grid to not be undefined");
  EMBER_CHECK(input.device() == grid.device(), DeviceError,
              "grid_sampler(): expected input and grid to be on same device, but input is on ", input.device().str(),
              " and grid is on ", grid.device().str());
  EMBER_CHECK(input.dtype() == grid.dtype(), TypeError,
              "grid_sampler(): expected input and grid to have same dtype, but input has ", caffe2_name(input.dtype()),
              " and grid has ", caffe2_name(grid.dtype()));
  // PyTorch's order: the checks common to 2-D and 3-D, then the rank (aten::grid_sampler sends
  // every input but a 4-D one to grid_sampler_3d, whose message names 5D).
  const int64_t dims = input.dim();
  const auto rank_error = [&] {
    detail::fail<ValueError>("grid_sampler(): expected ", dims == 4 ? 4 : 5,
                             "D input and grid with same number of dimensions, but got input with sizes ",
                             sizes_text(input.sizes()), " and grid with sizes ", sizes_text(grid.sizes()));
  };
  if (dims == 0 || grid.dim() == 0) rank_error();
  EMBER_CHECK(input.size(0) == grid.size(0), ValueError,
              "grid_sampler(): expected grid and input to have same batch size, but got input with sizes ",
              sizes_text(input.sizes()), " and grid with sizes ", sizes_text(grid.sizes()));
  EMBER_CHECK(grid.size(-1) == dims - 2, ValueError, "grid_sampler(): expected grid to have size ", dims - 2,
              " in last dimension, but got grid with sizes ", sizes_text(grid.sizes()));
  for (int64_t d = 2; d < dims; ++d) {
    EMBER_CHECK(input.size(d) > 0, ValueError,
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes ",
                sizes_text(input.sizes()), " with dimension ", d, " being empty");
  }
  if (!((dims == 4 || dims == 5) && grid.dim() == dims)) rank_error();
  EMBER_CHECK(!(dims == 5 && interpolation == static_cast<int64_t>(GridInterpolation::Bicubic)), ValueError,
              "grid_sampler(): bicubic interpolation only supports 4D input");
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64 || is_reduced_float(input.dtype()), TypeError,
              "\"grid_sampler_", dims - 2, "d_", input.is_cuda() ? "cuda" : "cpu", "\" not implemented for '",
              scalar_type_name(input.dtype()), "'");
}

Tensor grid_sampler(const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding,
                    bool align_corners) {
  check_grid_sampler(input, grid, interpolation);
  if (is_reduced_float(input.dtype())) {
    return grid_sampler(input.to(kFloat32), grid.to(kFloat32), interpolation, padding, align_corners).to(input.dtype());
  }
  IntList out_sizes = {input.size(0), input.size(1)};
  for (int64_t d = 1; d + 1 < grid.dim(); ++d) out_sizes.push_back(grid.size(d));
  Tensor output = make_tensor(out_sizes, input.dtype(), input.device());
  if (output.numel() == 0) return output;
  // The operands live in locals until the launch: a KernelCall holds only their pointers.
  const Tensor in = input.contiguous(), g = grid.contiguous();
  KernelCall call = grid_call(OpKind::GridSample, interpolation, padding, align_corners);
  call.outputs.push_back(make_arg(output));
  call.inputs.push_back(make_arg(in));
  call.inputs.push_back(make_arg(g));
  launch(input.device(), call);
  return output;
}

std::pair<Tensor, Tensor> grid_sampler_backward(const Tensor& grad_output, const Tensor& input, const Tensor& grid,
                                                int64_t interpolation, int64_t padding, bool align_corners,
                                                bool input_grad, bool grid_grad) {
  check_grid_sampler(input, grid, interpolation);
  check_same_device(grad_output, input);
  if (is_reduced_float(input.dtype())) {
    auto [gi, gg] = grid_sampler_backward(grad_output.to(kFloat32), input.to(kFloat32), grid.to(kFloat32),
                                          interpolation, padding, align_corners, input_grad, grid_grad);
    return {gi.defined() ? gi.to(input.dtype()) : gi, gg.defined() ? gg.to(grid.dtype()) : gg};
  }
  const Tensor go = grad_output.to(input.dtype()).contiguous(), in = input.contiguous(), g = grid.contiguous();
  const int64_t batch = input.size(0);
  int64_t points = 1, in_points = 1;
  for (int64_t d = 1; d + 1 < grid.dim(); ++d) points *= grid.size(d);
  for (int64_t d = 2; d < input.dim(); ++d) in_points *= input.size(d);
  const int64_t dims = input.dim() - 2;
  const int64_t taps = interpolation == static_cast<int64_t>(GridInterpolation::Nearest)   ? 1
                       : interpolation == static_cast<int64_t>(GridInterpolation::Bicubic) ? 16
                                                                                           : (int64_t{1} << dims);
  const Device device = input.device();
  Tensor grad_input, grad_grid, tap_index, tap_weight, starts, order;
  KernelCall call = grid_call(OpKind::GridSampleBackward, interpolation, padding, align_corners);
  if (grid_grad) grad_grid = make_tensor(grid.sizes(), grid.dtype(), device);
  call.outputs.push_back(grid_grad ? make_arg(grad_grid) : TensorArg{});
  if (input_grad) {
    grad_input = make_tensor(input.sizes(), input.dtype(), device);
    tap_index = make_tensor({batch, points * taps}, kInt64, device);
    tap_weight = make_tensor({batch, points * taps}, input.dtype(), device);
    starts = make_tensor({batch, in_points + 1}, kInt64, device);
    order = make_tensor({batch, points * taps}, kInt64, device);
    for (const Tensor* t : {&grad_input, &tap_index, &tap_weight, &starts, &order}) {
      call.outputs.push_back(make_arg(*t));
    }
  } else {
    call.outputs.push_back(TensorArg{});
  }
  for (const Tensor* t : {&go, &in, &g}) call.inputs.push_back(make_arg(*t));
  if ((grid_grad || input_grad) && batch > 0) launch(device, call);
  return {grad_input, grad_grid};
}

}  // namespace ember::detail
