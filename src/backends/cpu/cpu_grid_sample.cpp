// GridSample and GridSampleBackward (contracts and bodies in kernels/grid_sample_kernels.h):
// the forward and the backward's first phase over grid points, its counting sort over batch
// entries, its gather over the input gradient's elements (Note [Deterministic grid_sample
// backward]). Threads own disjoint outputs in every phase, so the thread count changes nothing.
#include <algorithm>

#include "backends/cpu/cpu_ops.h"
#include "kernels/grid_sample_kernels.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
const T* in(const KernelCall& call, size_t k) {
  return static_cast<const T*>(call.inputs.at(k).data);
}
template <typename T>
T* out(const KernelCall& call, size_t k) {
  return static_cast<T*>(call.outputs.at(k).data);
}

// Each grid point runs its taps for every channel: a smaller grain than the plain maps'.
template <typename F>
void over(int64_t count, int64_t work_per_item, F body) {
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_item));
  parallel_for(0, count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

template <typename T>
void run_typed(const KernelCall& call) {
  const GridGeometry g = grid_geometry(call);
  const int64_t points = g.batch * g.points;
  const int64_t per_point = g.channels * g.taps();
  if (call.op == OpKind::GridSample) {
    const T *input = in<T>(call, 0), *grid = in<T>(call, 1);
    T* output = out<T>(call, 0);
    return over(points, per_point,
                [&](int64_t i) { grid_sample_point<T>(g, input, grid, output, i / g.points, i % g.points); });
  }
  const T *grad_out = in<T>(call, 0), *input = in<T>(call, 1), *grid = in<T>(call, 2);
  T* grad_grid = out<T>(call, 0);
  T* grad_input = out<T>(call, 1);
  int64_t* tap_index = grad_input != nullptr ? out<int64_t>(call, 2) : nullptr;
  T* tap_weight = grad_input != nullptr ? out<T>(call, 3) : nullptr;
  over(points, per_point, [&](int64_t i) {
    grid_sample_backward_point<T>(g, grad_out, input, grid, grad_grid, tap_index, tap_weight, i / g.points,
                                  i % g.points);
  });
  if (grad_input == nullptr) return;
  int64_t* starts = out<int64_t>(call, 4);
  int64_t* order = out<int64_t>(call, 5);
  over(g.batch, g.points * g.taps() + g.in_points(),
       [&](int64_t n) { grid_sample_sort_taps(g, tap_index, starts, order, n); });
  const int64_t S = g.in_points();
  over(g.batch * g.channels * S, std::max(1, g.taps()), [&](int64_t i) {
    grid_sample_gather_input<T>(g, grad_out, tap_weight, starts, order, grad_input, i / (g.channels * S),
                                (i / S) % g.channels, i % S);
  });
}

}  // namespace

void run_grid_sample(const KernelCall& call) {
  const DType dtype = call.inputs.at(call.op == OpKind::GridSample ? 0 : 1).dtype;
  if (dtype == kFloat32) return run_typed<float>(call);
  if (dtype == kFloat64) return run_typed<double>(call);
  not_implemented(call.op == OpKind::GridSample ? "grid_sampler_cpu" : "grid_sampler_backward_cpu", dtype);
}

}  // namespace ember::detail::cpu
