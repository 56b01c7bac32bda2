// The element-wise engine of the driver backend: one KernelCall of a map op becomes
// one grid-stride kernel launch.
//
// The host side simplifies the iteration space with the shared make_loop_shape (drop
// size-1 dims, coalesce contiguous ones; strides in bytes). A dense result takes the
// vectorised kernel: each thread loads 16 bytes per operand (float4-sized aligned
// vectors), provided every pointer is aligned to that; anything else takes the strided
// kernel, which turns a linear index into per-operand byte offsets with an OffsetCalc
// passed by value. Both loop grid-stride, so one launch covers any numel.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.cuh"
#include "kernels/kernel_call.h"
#include "kernels/loop_shape.h"

namespace ember::detail::driver {

/// Dims an OffsetCalc holds after coalescing; more is a ValueError.
inline constexpr int kMaxDims = 16;

/// Linear (row-major) index -> byte offset of each of N operands.
template <int N>
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];

  __device__ void get(int64_t linear, int64_t (&offsets)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t size = sizes[d];
      int64_t index = linear % size;
      linear /= size;
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] += index * strides[d][k];
    }
  }
};

template <int N>
OffsetCalc<N> make_offset_calc(const LoopShape& shape) {
  EMBER_CHECK(shape.ndim() <= kMaxDims, ValueError, "CUDA kernels support at most ", kMaxDims,
              " dimensions after merging contiguous ones, but the operands need ", shape.ndim());
  OffsetCalc<N> calc;
  calc.ndim = shape.ndim();
  for (int d = 0; d < shape.ndim(); ++d) {
    calc.sizes[d] = shape.sizes[d];
    for (int k = 0; k < N; ++k) calc.strides[d][k] = shape.strides[d][k];
  }
  return calc;
}

template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T val[N];
};

/// Input pointers, by value.
template <int N>
struct Pointers {
  const char* p[N > 0 ? N : 1];
};

template <typename Out, typename In, int NIn, typename Op>
__device__ inline Out apply(const Op& op, const In (&args)[NIn > 0 ? NIn : 1]) {
  using C = compute_t<In>;
  if constexpr (NIn == 0) return convert<Out>(op());
  else if constexpr (NIn == 1) return convert<Out>(op(convert<C>(args[0])));
  else return convert<Out>(op(convert<C>(args[0]), convert<C>(args[1])));
}

template <int Vec, typename Out, typename In, int NIn, typename Op>
__global__ void map_contiguous_kernel(int64_t n, Out* out, Pointers<NIn> in, Op op) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t vectors = n / Vec;
  for (int64_t v = first; v < vectors; v += stride) {
    AlignedVector<In, Vec> loaded[NIn > 0 ? NIn : 1];
#pragma unroll
    for (int k = 0; k < NIn; ++k) loaded[k] = reinterpret_cast<const AlignedVector<In, Vec>*>(in.p[k])[v];
    AlignedVector<Out, Vec> result;
#pragma unroll
    for (int j = 0; j < Vec; ++j) {
      In args[NIn > 0 ? NIn : 1];
#pragma unroll
      for (int k = 0; k < NIn; ++k) args[k] = loaded[k].val[j];
      result.val[j] = apply<Out, In, NIn>(op, args);
    }
    reinterpret_cast<AlignedVector<Out, Vec>*>(out)[v] = result;
  }
  for (int64_t i = vectors * Vec + first; i < n; i += stride) {  // the tail
    In args[NIn > 0 ? NIn : 1];
#pragma unroll
    for (int k = 0; k < NIn; ++k) args[k] = reinterpret_cast<const In*>(in.p[k])[i];
    out[i] = apply<Out, In, NIn>(op, args);
  }
}

template <typename Out, typename In, int NIn, typename Op>
__global__ void map_strided_kernel(int64_t n, char* out, Pointers<NIn> in, OffsetCalc<NIn + 1> calc, Op op) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t offsets[NIn + 1];
    calc.get(i, offsets);
    In args[NIn > 0 ? NIn : 1];
#pragma unroll
    for (int k = 0; k < NIn; ++k) args[k] = *reinterpret_cast<const In*>(in.p[k] + offsets[k + 1]);
    *reinterpret_cast<Out*>(out + offsets[0]) = apply<Out, In, NIn>(op, args);
  }
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

/// out = op(in0, ...) element-wise for the call's first output and first NIn inputs,
/// with Out/In the device storage types and `op` a functor over compute_t<In>.
template <typename Out, typename In, int NIn, typename Op>
void launch_map(const KernelCall& call, cudaStream_t stream, const Op& op) {
  const TensorArg& out = call.outputs.at(0);
  std::vector<const TensorArg*> operands{&out};
  for (int k = 0; k < NIn; ++k) operands.push_back(&call.inputs.at(k));
  LoopShape shape = make_loop_shape(operands, /*reorder=*/true);
  if (shape.numel == 0) return;
  Pointers<NIn> in{};
  for (int k = 0; k < NIn; ++k) in.p[k] = static_cast<const char*>(call.inputs[k].data);

  constexpr int kWidest = static_cast<int>(std::max(sizeof(Out), sizeof(In)));
  constexpr int kVec = std::clamp(16 / kWidest, 1, 8);
  bool dense = shape.contiguous(0, sizeof(Out));
  bool aligned = aligned_to(out.data, sizeof(Out) * kVec);
  for (int k = 0; k < NIn; ++k) {
    dense = dense && shape.contiguous(k + 1, sizeof(In));
    aligned = aligned && aligned_to(in.p[k], sizeof(In) * kVec);
  }
  if (dense && aligned) {
    map_contiguous_kernel<kVec, Out, In, NIn><<<grid_blocks((shape.numel + kVec - 1) / kVec), kThreads, 0, stream>>>(
        shape.numel, static_cast<Out*>(out.data), in, op);
  } else {
    map_strided_kernel<Out, In, NIn><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
        shape.numel, static_cast<char*>(out.data), in, make_offset_calc<NIn + 1>(shape), op);
  }
  check_launch(stream);
}

}  // namespace ember::detail::driver

namespace ember::detail::driver {

/// Stores `value` converted to `dtype` at `p`: the runtime-typed store of Copy and of
/// reductions, whose output dtype is independent of the input's. The switch is uniform
/// across a warp, so it costs no divergence.
template <typename V>
__device__ inline void store_as(char* p, DType dtype, V value) {
  switch (dtype) {
    case DType::Bool: *reinterpret_cast<bool*>(p) = convert<bool>(value); break;
    case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = convert<uint8_t>(value); break;
    case DType::Int8: *reinterpret_cast<int8_t*>(p) = convert<int8_t>(value); break;
    case DType::Int16: *reinterpret_cast<int16_t*>(p) = convert<int16_t>(value); break;
    case DType::Int32: *reinterpret_cast<int32_t*>(p) = convert<int32_t>(value); break;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = convert<int64_t>(value); break;
    case DType::Float16: *reinterpret_cast<Half*>(p) = convert<Half>(value); break;
    case DType::BFloat16: *reinterpret_cast<BFloat16*>(p) = convert<BFloat16>(value); break;
    case DType::Float32: *reinterpret_cast<float*>(p) = convert<float>(value); break;
    case DType::Float64: *reinterpret_cast<double*>(p) = convert<double>(value); break;
    case DType::Complex64:
      *reinterpret_cast<::cuda::std::complex<float>*>(p) = convert<::cuda::std::complex<float>>(value);
      break;
    case DType::Complex128:
      *reinterpret_cast<::cuda::std::complex<double>*>(p) = convert<::cuda::std::complex<double>>(value);
      break;
  }
}

using Bits16 = ::cuda::std::complex<double>;  // a 16-byte type whose convert is the identity

/// Calls f(TypeTag<U>{}) with U a carrier of `bytes` bytes, for kernels that move
/// elements as raw bits (compiled once per element size, not per dtype).
template <typename F>
void dispatch_bits(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    case 16: return f(TypeTag<Bits16>{});
  }
  EMBER_ASSERT(false);
}

}  // namespace ember::detail::driver
