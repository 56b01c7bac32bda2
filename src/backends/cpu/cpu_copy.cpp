// Copy (any dtype to any dtype, convert.h's rules) and Fill.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"

namespace ember::detail::cpu {
namespace {

template <typename C>
struct Identity {
  C operator()(C x) const { return x; }
};

// Same dtype: bytes move unchanged, dense rows by memcpy.
void copy_same_dtype(const TensorArg& out, const TensorArg& in) {
  LoopShape s = make_loop_shape({&out, &in}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  const int64_t size = static_cast<int64_t>(itemsize(out.dtype));
  parallel_loop(s, base, [size](char* const* p, const int64_t* st, int64_t n) {
    if (st[0] == size && st[1] == size) {
      std::memmove(p[0], p[1], static_cast<size_t>(n * size));
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * st[0], p[1] + i * st[1], static_cast<size_t>(size));
    }
  });
}

}  // namespace

void run_copy(const KernelCall& call) {
  const TensorArg& out = call.outputs.at(0);
  const TensorArg& in = call.inputs.at(0);
  if (out.dtype == in.dtype) return copy_same_dtype(out, in);
  dispatch(out.dtype, [&]<typename Out>(TypeTag<Out>) {
    dispatch(in.dtype, [&]<typename In>(TypeTag<In>) { map_unary<Out, In>(out, in, Identity<compute_t<In>>{}); });
  });
}

void run_fill(const KernelCall& call) {
  const TensorArg& out = call.outputs.at(0);
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    const T value = call.arg<kargs::Value>().value.to<T>();
    LoopShape s = make_loop_shape({&out}, /*reorder=*/true);
    char* base[] = {static_cast<char*>(out.data)};
    parallel_loop(s, base, [value](char* const* p, const int64_t* st, int64_t n) {
      if (st[0] == static_cast<int64_t>(sizeof(T))) {
        std::fill_n(reinterpret_cast<T*>(p[0]), n, value);
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * st[0]) = value;
      }
    });
  });
}

}  // namespace ember::detail::cpu
