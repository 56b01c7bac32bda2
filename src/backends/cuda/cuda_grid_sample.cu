// GridSample and GridSampleBackward on the driver backend (contracts and bodies in
// kernels/grid_sample_kernels.h), running the bodies the cpu runs (cpu_grid_sample.cpp) in
// grid-stride loops: one thread per grid point, then (backward) one per batch entry for the
// counting sort, then one per element of the input's gradient for the gather. No atomics:
// Note [Deterministic grid_sample backward]. The sort's thread per batch entry walks all of
// that entry's taps; its work is linear, its parallelism the batch's.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/grid_sample_kernels.h"

namespace ember::detail::driver {
namespace {

template <typename T>
__global__ void grid_sample_kernel(GridGeometry g, const T* input, const T* grid, T* output) {
  const int64_t total = g.batch * g.points;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    grid_sample_point<T>(g, input, grid, output, i / g.points, i % g.points);
  }
}

template <typename T>
__global__ void grid_sample_backward_point_kernel(GridGeometry g, const T* grad_out, const T* input, const T* grid,
                                                  T* grad_grid, int64_t* tap_index, T* tap_weight) {
  const int64_t total = g.batch * g.points;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    grid_sample_backward_point<T>(g, grad_out, input, grid, grad_grid, tap_index, tap_weight, i / g.points,
                                  i % g.points);
  }
}

__global__ void grid_sample_sort_kernel(GridGeometry g, const int64_t* tap_index, int64_t* starts, int64_t* order) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < g.batch; n += stride) {
    grid_sample_sort_taps(g, tap_index, starts, order, n);
  }
}

template <typename T>
__global__ void grid_sample_gather_kernel(GridGeometry g, const T* grad_out, const T* tap_weight, const int64_t* starts,
                                          const int64_t* order, T* grad_input) {
  const int64_t S = g.in_points();
  const int64_t total = g.batch * g.channels * S;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    grid_sample_gather_input<T>(g, grad_out, tap_weight, starts, order, grad_input, i / (g.channels * S),
                                (i / S) % g.channels, i % S);
  }
}

template <typename T>
void launch_typed(const KernelCall& call, cudaStream_t stream) {
  const GridGeometry g = grid_geometry(call);
  const int64_t points = g.batch * g.points;
  if (call.op == OpKind::GridSample) {
    if (points == 0 || g.channels == 0) return;
    grid_sample_kernel<T><<<grid_blocks(points), kThreads, 0, stream>>>(g, static_cast<const T*>(call.inputs[0].data),
                                                                        static_cast<const T*>(call.inputs[1].data),
                                                                        static_cast<T*>(call.outputs[0].data));
    return check_launch(stream);
  }
  const T* grad_out = static_cast<const T*>(call.inputs[0].data);
  T* grad_grid = static_cast<T*>(call.outputs[0].data);
  T* grad_input = static_cast<T*>(call.outputs[1].data);
  int64_t* tap_index = grad_input != nullptr ? static_cast<int64_t*>(call.outputs[2].data) : nullptr;
  T* tap_weight = grad_input != nullptr ? static_cast<T*>(call.outputs[3].data) : nullptr;
  if (points > 0) {
    grid_sample_backward_point_kernel<T><<<grid_blocks(points), kThreads, 0, stream>>>(
        g, grad_out, static_cast<const T*>(call.inputs[1].data), static_cast<const T*>(call.inputs[2].data), grad_grid,
        tap_index, tap_weight);
    check_launch(stream);
  }
  if (grad_input == nullptr || g.batch == 0) return;
  int64_t* starts = static_cast<int64_t*>(call.outputs[4].data);
  int64_t* order = static_cast<int64_t*>(call.outputs[5].data);
  grid_sample_sort_kernel<<<grid_blocks(g.batch), kThreads, 0, stream>>>(g, tap_index, starts, order);
  check_launch(stream);
  const int64_t elements = g.batch * g.channels * g.in_points();
  if (elements == 0) return;
  grid_sample_gather_kernel<T>
      <<<grid_blocks(elements), kThreads, 0, stream>>>(g, grad_out, tap_weight, starts, order, grad_input);
  check_launch(stream);
}

}  // namespace

void launch_grid_sample(const KernelCall& call, cudaStream_t stream) {
  const DType dtype = call.inputs.at(call.op == OpKind::GridSample ? 0 : 1).dtype;
  EMBER_CHECK(dtype == kFloat32 || dtype == kFloat64, TypeError, "\"",
              call.op == OpKind::GridSample ? "grid_sampler_cuda" : "grid_sampler_backward_cuda",
              "\" not implemented for '", scalar_type_name(dtype), "'");
  if (dtype == kFloat32) launch_typed<float>(call, stream);
  else launch_typed<double>(call, stream);
}

}  // namespace ember::detail::driver
