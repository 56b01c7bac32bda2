// The host iteration engine: runs typed element-wise bodies over a LoopShape.
//
// for_each_row walks a linear element range with an N-d counter over the outer dims
// and hands the innermost dim to a body as (pointers, byte strides, count). Map1/Map2
// are those bodies for unary/binary functors. parallel_loop splits large loops.
//
// Note [Dense element-wise loops]
// When every operand of a row is dense, the functor runs straight over the arrays in
// fixed blocks of kBlock elements under `#pragma GCC ivdep`: -O2 only vectorises loops
// that need no runtime alias check, and an element-wise map has no loop-carried
// dependence as long as the output either is an input (in place) or does not overlap
// it, which the op layer guarantees (PyTorch rejects partial overlap too). Other rows
// (broadcast stride 0, strided) load each input block into a local array (fill or
// gather), compute from the locals (which cannot alias the output) and store or scatter.
// No path has per-element branches, calls or allocation.
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
  if (begin >= end) return;  // also keeps empty dims out of the counter arithmetic
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
  // The operands' pointers follow the counter (ptrs[k] = base[k] + sum over d of c[d] *
  // strides[d][k] throughout): a step moves them by strides, without a product per dim and
  // operand for every row (a broadcast's rows can be as short as 2 elements).
  char* ptrs[kMaxLoopOperands];
  for (int k = 0; k < nops; ++k) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += c[d] * s.strides[d][k];
    ptrs[k] = base[k] + off;
  }
  for (int64_t pos = begin; pos < end;) {
    int64_t n = inner_size - c[nd - 1];
    if (n > end - pos) n = end - pos;
    body(ptrs, inner_strides, n);
    pos += n;
    if (pos >= end) break;
    c[nd - 1] += n;
    for (int k = 0; k < nops; ++k) ptrs[k] += n * inner_strides[k];
    for (int d = nd - 1; d > 0 && c[d] == s.sizes[d]; --d) {
      c[d] = 0;
      ++c[d - 1];
      for (int k = 0; k < nops; ++k) ptrs[k] += s.strides[d - 1][k] - s.sizes[d] * s.strides[d][k];
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
    const F fn = f;  // a local copy: stores to out cannot alias the functor's state
    char* out = p[0];
    const char* in = p[1];
    if (st[0] == static_cast<int64_t>(sizeof(Out)) && st[1] == static_cast<int64_t>(sizeof(In))) {
      Out* o = reinterpret_cast<Out*>(out);
      const In* a = reinterpret_cast<const In*>(in);
      int64_t i = 0;
      for (; i + kBlock <= n; i += kBlock) {
        // See Note [Dense element-wise loops].
#pragma GCC ivdep
        for (int j = 0; j < kBlock; ++j) o[i + j] = convert<Out>(fn(convert<C>(a[i + j])));
      }
      for (; i < n; ++i) o[i] = convert<Out>(fn(convert<C>(a[i])));
      return;
    }
    for (int64_t i = 0; i < n; i += kBlock) {
      int m = n - i < kBlock ? static_cast<int>(n - i) : kBlock;
      C a[kBlock];
      Out o[kBlock];
      load_block<C, In>(a, in + i * st[1], st[1], m);
      if (m == kBlock && st[0] == static_cast<int64_t>(sizeof(Out))) {
        // Inputs sit in locals, so writing straight to out cannot alias them.
        Out* dst = reinterpret_cast<Out*>(out + i * st[0]);
        for (int j = 0; j < kBlock; ++j) dst[j] = convert<Out>(fn(a[j]));
        continue;
      }
      for (int j = 0; j < m; ++j) o[j] = convert<Out>(fn(a[j]));
      store_block(out + i * st[0], st[0], o, m);
    }
  }
};

/// out = convert<Out>(f(in0, in1)).
template <typename Out, typename In, typename C, typename F>
struct Map2 {
  F f;
  void operator()(char* const* p, const int64_t* st, int64_t n) const {
    const F fn = f;
    char* out = p[0];
    const char* in0 = p[1];
    const char* in1 = p[2];
    constexpr int64_t kIn = sizeof(In);
    if (st[0] == static_cast<int64_t>(sizeof(Out)) && st[1] == kIn && st[2] == kIn) {
      Out* o = reinterpret_cast<Out*>(out);
      const In* a = reinterpret_cast<const In*>(in0);
      const In* b = reinterpret_cast<const In*>(in1);
      int64_t i = 0;
      for (; i + kBlock <= n; i += kBlock) {
#pragma GCC ivdep
        for (int j = 0; j < kBlock; ++j) o[i + j] = convert<Out>(fn(convert<C>(a[i + j]), convert<C>(b[i + j])));
      }
      for (; i < n; ++i) o[i] = convert<Out>(fn(convert<C>(a[i]), convert<C>(b[i])));
      return;
    }
    for (int64_t i = 0; i < n; i += kBlock) {
      int m = n - i < kBlock ? static_cast<int>(n - i) : kBlock;
      C a[kBlock], b[kBlock];
      Out o[kBlock];
      load_block<C, In>(a, in0 + i * st[1], st[1], m);
      load_block<C, In>(b, in1 + i * st[2], st[2], m);
      if (m == kBlock && st[0] == static_cast<int64_t>(sizeof(Out))) {
        Out* dst = reinterpret_cast<Out*>(out + i * st[0]);
        for (int j = 0; j < kBlock; ++j) dst[j] = convert<Out>(fn(a[j], b[j]));
        continue;
      }
      for (int j = 0; j < m; ++j) o[j] = convert<Out>(fn(a[j], b[j]));
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
