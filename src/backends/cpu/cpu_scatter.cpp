// Gather and ScatterAdd on the host. A bad index raises PyTorch's IndexError; scatter_add
// checks every index before it writes, so its output (in place: self) is left untouched.
//
// gather is a map over the index's shape with three operands, as index_select: the output,
// the input with stride 0 along `dim` (each position's line base) and the index; each
// element reads base[index * stride(dim)]. scatter_add walks each line of the index in
// order (Note [Line kernels] in kernels/line_bodies.h), so its sums equal the driver's.
#include <atomic>
#include <cstring>

#include "backends/cpu/cpu_lines.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/line_bodies.h"
#include "kernels/op_name.h"

namespace ember::detail::cpu {

void check_index_bounds(const TensorArg& index, int64_t dim, int64_t size) {
  // A branch-free pass over every thread first (a negative index wraps to a large unsigned
  // one); only a failure pays for the ordered scan that names the first bad index.
  LoopShape any_order = make_loop_shape({&index}, /*reorder=*/true);
  if (any_order.numel == 0) return;
  char* base[] = {static_cast<char*>(index.data)};
  const auto limit = static_cast<uint64_t>(size);
  std::atomic<bool> bad{false};
  parallel_loop(any_order, base, [limit, &bad](char* const* p, const int64_t* st, int64_t n) {
    bool out_of_range = false;
    for (int64_t i = 0; i < n; ++i) {
      out_of_range |= static_cast<uint64_t>(*reinterpret_cast<const int64_t*>(p[0] + i * st[0])) >= limit;
    }
    if (out_of_range) bad.store(true, std::memory_order_relaxed);
  });
  if (!bad.load()) return;
  LoopShape ordered = make_loop_shape({&index}, /*reorder=*/false);
  bool found = false;
  int64_t first_bad = 0;
  auto scan = [&](char* const* p, const int64_t* st, int64_t n) {
    for (int64_t i = 0; i < n && !found; ++i) {
      const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * st[0]);
      if (v < 0 || v >= size) found = true, first_bad = v;
    }
  };
  for_each_row(ordered, base, 0, ordered.numel, scan);
  fail<IndexError>("index ", first_bad, " is out of bounds for dimension ", dim, " with size ", size);
}

namespace {

// Returns false if an index was outside [0, size) (its element is left unwritten).
template <size_t kBytes>
bool gather_bytes(const TensorArg& out, const TensorArg& base, const TensorArg& index, int64_t dim_stride_bytes,
                  int64_t size) {
  LoopShape s = make_loop_shape({&out, &base, &index}, /*reorder=*/true);
  char* ptrs[] = {static_cast<char*>(out.data), static_cast<char*>(base.data), static_cast<char*>(index.data)};
  std::atomic<bool> bad{false};
  parallel_loop(s, ptrs, [dim_stride_bytes, size, &bad](char* const* p, const int64_t* st, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = *reinterpret_cast<const int64_t*>(p[2] + i * st[2]);
      if (k < 0 || k >= size) {
        bad.store(true, std::memory_order_relaxed);
        continue;
      }
      std::memcpy(p[0] + i * st[0], p[1] + i * st[1] + k * dim_stride_bytes, kBytes);
    }
  });
  return !bad.load();
}

void run_gather(const KernelCall& call) {
  const TensorArg &out = call.outputs[0], &in = call.inputs[0], &index = call.inputs[1];
  const int64_t along = call.arg<kargs::Dim>().dim;
  const auto dim = static_cast<size_t>(along);
  expect_dtype("gather", out, in.dtype);
  expect_dtype("gather", index, kInt64);
  if (out.numel() == 0) return;
  TensorArg base = in;
  base.sizes = out.sizes;
  base.strides[dim] = 0;
  const int64_t step = in.strides[dim] * static_cast<int64_t>(itemsize(in.dtype)), size = in.sizes[dim];
  bool in_range = true;
  switch (itemsize(in.dtype)) {
    case 1: in_range = gather_bytes<1>(out, base, index, step, size); break;
    case 2: in_range = gather_bytes<2>(out, base, index, step, size); break;
    case 4: in_range = gather_bytes<4>(out, base, index, step, size); break;
    case 8: in_range = gather_bytes<8>(out, base, index, step, size); break;
    default: in_range = gather_bytes<16>(out, base, index, step, size); break;
  }
  // The output is the op's own fresh tensor, so the check rides along the copy; a second,
  // ordered scan names the first bad index, as PyTorch's message does.
  if (!in_range) check_index_bounds(index, along, size);
}

void run_scatter_add(const KernelCall& call) {
  const TensorArg &out = call.outputs[0], &index = call.inputs[0], &src = call.inputs[1];
  const int64_t along = call.arg<kargs::Dim>().dim;
  const auto dim = static_cast<size_t>(along);
  expect_dtype("scatter_add_", src, out.dtype);
  expect_dtype("scatter_add_", index, kInt64);
  check_index_bounds(index, along, out.sizes[dim]);
  const int64_t n = index.sizes[dim];
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    using C = compute_t<T>;
    const int64_t out_step = out.strides[dim] * static_cast<int64_t>(sizeof(T));
    const int64_t index_step = index.strides[dim] * static_cast<int64_t>(sizeof(int64_t));
    const int64_t src_step = src.strides[dim] * static_cast<int64_t>(sizeof(T));
    for_each_line<3>({out, index, src}, index.sizes, along, n, [&](const std::array<char*, 3>& line) {
      scatter_add_line<T, C>(line[0], out_step, line[1], index_step, line[2], src_step, n);
    });
  });
}

}  // namespace

void run_scatter(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 2, ValueError, op_name(call.op),
              ": expected 1 output and 2 inputs");
  if (call.op == OpKind::Gather) return run_gather(call);
  return run_scatter_add(call);
}

}  // namespace ember::detail::cpu
