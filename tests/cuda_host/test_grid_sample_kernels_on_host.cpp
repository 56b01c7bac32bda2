// The driver's grid sampling (cuda_grid_sample.cu) runs on the host against the cpu's
// (cpu_grid_sample.cpp): the forward and the whole backward (taps, the counting sort, the
// gather, the grid's gradient) of every mode and padding, both align_corners, 2-D and 3-D,
// float32 and float64, grids reaching past the borders, and an empty batch.
#include "compare_with_cpu.h"
#include "kernels/grid_sample_kernels.h"

namespace ember::host_test {
namespace {

TEST(GridSampleKernelsOnHost, ForwardAndBackwardMatchCpu) {
  manual_seed(38);
  using detail::GridInterpolation;
  using detail::GridPadding;
  for (DType d : {kFloat32, kFloat64}) {
    for (int dims : {2, 3}) {
      for (int64_t batch : {int64_t{2}, int64_t{0}}) {
        const IntList in_sizes = dims == 2 ? IntList{batch, 3, 5, 6} : IntList{batch, 3, 4, 5, 6};
        const IntList grid_sizes = dims == 2 ? IntList{batch, 7, 9, 2} : IntList{batch, 3, 7, 9, 3};
        IntList out_sizes = {batch, 3};
        for (size_t k = 1; k + 1 < grid_sizes.size(); ++k) out_sizes.push_back(grid_sizes[k]);
        int64_t points = 1, in_points = 1;
        for (size_t k = 1; k + 1 < grid_sizes.size(); ++k) points *= grid_sizes[k];
        for (size_t k = 2; k < in_sizes.size(); ++k) in_points *= in_sizes[k];
        Tensor input = randn(in_sizes, kFloat64).to(d);
        Tensor grid = (rand(grid_sizes, kFloat64) * 2.6 - 1.3).to(d);  // some points outside [-1, 1]
        Tensor grad_out = randn(out_sizes, kFloat64).to(d);
        for (auto interpolation :
             {GridInterpolation::Bilinear, GridInterpolation::Nearest, GridInterpolation::Bicubic}) {
          if (dims == 3 && interpolation == GridInterpolation::Bicubic) continue;
          const int64_t taps = interpolation == GridInterpolation::Nearest   ? 1
                               : interpolation == GridInterpolation::Bicubic ? 16
                                                                             : (int64_t{1} << dims);
          for (auto padding : {GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection}) {
            for (bool align : {false, true}) {
              const std::string what = std::string(dtype_name(d)) + " " + std::to_string(dims) + "-D batch " +
                                       std::to_string(batch) + " mode " + std::to_string(int(interpolation)) +
                                       " padding " + std::to_string(int(padding)) + (align ? " aligned" : "");
              KernelCall forward{
                  OpKind::GridSample, {}, {arg(input), arg(grid)}, detail::grid_args(interpolation, padding, align)};
              compare_outputs(forward, {empty(out_sizes, d)}, what);
              KernelCall backward{OpKind::GridSampleBackward,
                                  {},
                                  {arg(grad_out), arg(input), arg(grid)},
                                  detail::grid_args(interpolation, padding, align)};
              compare_outputs(backward,
                              {empty(grid_sizes, d), empty(in_sizes, d), empty({batch, points * taps}, kInt64),
                               empty({batch, points * taps}, d), empty({batch, in_points + 1}, kInt64),
                               empty({batch, points * taps}, kInt64)},
                              what + " backward", 1e-4, 1e-5);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember::host_test
