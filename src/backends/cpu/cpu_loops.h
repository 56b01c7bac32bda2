// The host iteration engine: runs typed element-wise bodies over a LoopShape.
//
// for_each_row walks a linear element range with an N-d counter over the outer dims
// and hands the innermost dim to a body as (pointers, byte strides, count). map1/map2
// are those bodies for unary/binary functors: they work in blocks of kBlock elements,
// loading each operand into a local array (dense copy, broadcast fill or strided
// gather), applying the functor on the locals and storing. Locals cannot alias, so the
// compute loop vectorises at -O2 even for in-place ops; a dense block has no per-element
// branches, calls or allocation. parallel_loop splits large loops over the pool.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "kernels/loop_shape.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {

inline constexpr int kBlock = 64;

/// Calls body(ptrs, inner_strides, n) for the rows covering linear elements [begin, end).
template <typename Body>
void for_each_row(const LoopShape& s, char* const* base, int64_t begin, int64_t end, Body& body) {
  const int nd = s.ndim(), nops = s.num_operands;
  const int64_t inner_size = s.sizes[nd - 1];
  int64_t inner_strides[kMaxLoopOperands];
  for (int k = 0; k < nops; ++k) inner_strides[k] = s.strides[nd - 1][k];
  int64_t counter[64];  // dims after simplification never exceed a tensor's dims
  std::vector<int64_t> heap_counter;
  int64_t* c = counter;
  if (nd > 64) {
    heap_counter.resize(nd);
    c = heap_counter.data();
  }
  int64_t rest = begin;
  for (int d = nd - 1; d >= 0; --d) {
    c[d] = rest % s.sizes[d];
    rest /= s.sizes[d];
  }
  char* ptrs[kMaxLoopOperands];
  for (int64_t pos = begin; pos < end;) {
    for (int k = 0; k < nops; ++k) {
      int64_t off = 0;
      for (int d = 0; d < nd; ++d) off += c[d] * s.strides[d][k];
      ptrs[k] = base[k] + off;
    }
    int64_t n = inner_size - c[nd - 1];
    if (n > end - pos) n = end - pos;
    body(ptrs, inner_strides, n);
    pos += n;
    c[nd - 1] += n;
    for (int d = nd - 1; d > 0 && c[d] == s.sizes[d]; --d) {
      c[d] = 0;
      ++c[d - 1];
    }
  }
}

/// Runs body over every element of `s`, on several threads when large.
template <typename Body>
void parallel_loop(const LoopShape& s, char* const* base, Body body, int64_t grain = kGrainSize) {
  parallel_for(0, s.numel, grain, [&](int64_t b, int64_t e) { for_each_row(s, base, b, e, body); });
}

/// Loads m elements of storage type T from p (byte stride) into dst as compute type C.
template <typename C, typename T>
inline void load_block(C* dst, const char* p, int64_t stride, int m) {
  if (stride == static_cast<int64_t>(sizeof(T))) {
    const T* src = reinterpret_cast<const T*>(p);
    if (m == kBlock) {
      for (int j = 0; j < kBlock; ++j) dst[j] = convert<C>(src[j]);
    } else {
      for (int j = 0; j < m; ++j) dst[j] = convert<C>(src[j]);
    }
  } else if (stride == 0) {
    C v = convert<C>(*reinterpret_cast<const T*>(p));
    for (int j = 0; j < kBlock; ++j) dst[j] = v;
  } else {
    for (int j = 0; j < m; ++j) dst[j] = convert<C>(*reinterpret_cast<const T*>(p + j * stride));
  }
}

template <typename T>
inline void store_block(char* p, int64_t stride, const T* src, int m) {
  if (stride == static_cast<int64_t>(sizeof(T))) {
    std::memcpy(p, src, sizeof(T) * static_cast<size_t>(m));
  } else {
    for (int j = 0; j < m; ++j) std::memcpy(p + j * stride, src + j, sizeof(T));
  }
}

/// out = convert<Out>(f(in)), in of storage type In computed as C.
template <typename Out, typename In, typename C, typename F>
struct Map1 {
  F f;
  void operator()(char* const* p, const int64_t* st, int64_t n) const {
    char* out = p[0];
    const char* in = p[1];
    for (int64_t i = 0; i < n; i += kBlock) {
      int m = n - i < kBlock ? static_cast<int>(n - i) : kBlock;
      C a[kBlock];
      Out o[kBlock];
      load_block<C, In>(a, in + i * st[1], st[1], m);
      if (m == kBlock) {
        for (int j = 0; j < kBlock; ++j) o[j] = convert<Out>(f(a[j]));
      } else {
        for (int j = 0; j < m; ++j) o[j] = convert<Out>(f(a[j]));
      }
      store_block(out + i * st[0], st[0], o, m);
    }
  }
};

/// out = convert<Out>(f(in0, in1)).
template <typename Out, typename In, typename C, typename F>
struct Map2 {
  F f;
  void operator()(char* const* p, const int64_t* st, int64_t n) const {
    char* out = p[0];
    const char* in0 = p[1];
    const char* in1 = p[2];
    for (int64_t i = 0; i < n; i += kBlock) {
      int m = n - i < kBlock ? static_cast<int>(n - i) : kBlock;
      C a[kBlock], b[kBlock];
      Out o[kBlock];
      load_block<C, In>(a, in0 + i * st[1], st[1], m);
      load_block<C, In>(b, in1 + i * st[2], st[2], m);
      if (m == kBlock) {
        for (int j = 0; j < kBlock; ++j) o[j] = convert<Out>(f(a[j], b[j]));
      } else {
        for (int j = 0; j < m; ++j) o[j] = convert<Out>(f(a[j], b[j]));
      }
      store_block(out + i * st[0], st[0], o, m);
    }
  }
};

/// Applies a unary functor over call-shaped operands out, in (in TensorArg form).
template <typename Out, typename In, typename F>
void map_unary(const TensorArg& out, const TensorArg& in, F f) {
  LoopShape s = make_loop_shape({&out, &in}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  parallel_loop(s, base, Map1<Out, In, compute_t<In>, F>{f});
}

template <typename Out, typename In, typename F>
void map_binary(const TensorArg& out, const TensorArg& in0, const TensorArg& in1, F f) {
  LoopShape s = make_loop_shape({&out, &in0, &in1}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in0.data), static_cast<char*>(in1.data)};
  parallel_loop(s, base, Map2<Out, In, compute_t<In>, F>{f});
}

}  // namespace ember::detail::cpu
