// The host execution layer: ember's CUDA kernel sources (src/backends/cuda/*.cu) compiled
// by the host C++ compiler and run on the CPU, so the driver backend's device code and its
// launch-configuration code are tested on machines without a GPU. Built for tests only
// (tests/cuda_host/CMakeLists.txt); nothing here is part of the library or of nvcc's build.
//
// Approach: a shim, not __host__ __device__ bodies. The .cu files are compiled unchanged by
// g++ after a mechanical rewrite (rewrite_launches.py): each `kernel<<<grid, block, shared,
// stream>>>(args)` becomes a call of ember_cuda_host::launch(...) with the kernel call as a
// lambda, and each `__shared__` declaration a reference to guarded storage (below). The CUDA
// names the kernels use come from this header, reached through the fake <cuda_runtime_api.h>
// of tests/cuda_host/include, which shadows the real one.
// Chosen over __host__ __device__ bodies because it leaves the driver's device code exactly
// as nvcc sees it (no execution-context parameter threaded through every kernel) and new
// kernels are covered without being written for it. The driver's namespace is renamed to
// ember::detail::cuda_host_driver by a macro, so the host copies never clash with the
// library's own driver symbols.
//
// Execution model (one OS thread runs a whole launch, blocks in order):
// - threadIdx/blockIdx/blockDim/gridDim are per-thread contexts the runner switches.
// - Launches from a file that uses no block or warp synchronisation run each thread as a
//   plain call. Otherwise each thread of a block is a fiber: persistent per OS thread (made
//   once with makecontext), switched with _setjmp/_longjmp, the switches annotated for
//   AddressSanitizer (__sanitizer_start/finish_switch_fiber). Not annotated for
//   ThreadSanitizer: these tests are not built under it (CMakeLists.txt).
// - __syncthreads releases when every thread of the block waits at the same barrier; threads
//   that exited, or wait at another barrier, make it a KernelError naming the kernel.
// - Warp intrinsics (__shfl_*_sync, __ballot_sync, __any/__all_sync, __syncwarp) have 32-lane
//   semantics over the fibers of a warp; a mask naming a lane that exited is a KernelError.
// - Shared memory: each `__shared__ T x[N]` (per declaration site) and the launch's dynamic
//   shared memory (`extern __shared__ T x[]`, sized by the launch) live in their own mapping
//   that ends at a PROT_NONE guard page, filled with kSharedPoison for each block, so reads
//   of shared memory nobody wrote show up as garbage in the comparison, and an access past
//   the end is a KernelError naming the kernel (a SIGSEGV handler turns the guard-page fault
//   into it; the variable's tail padding to its alignment, and accesses before its start,
//   are not caught).
// - atomics are plain read-modify-writes (one OS thread; no preemption inside them).
// - assert() in a kernel is the device assert: it prints, aborts the kernel and makes the
//   stream's next synchronisation return cudaErrorAssert (sticky), as on a GPU.
// - EdgeBlocksOnly runs only the first and last blocks of each grid, for > 2^31-element
//   launches; device 1 of the stand-in runtime has enough multiprocessors for grid_blocks to
//   give one block per 256 elements there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- CUDA keywords --------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
// __shared__ declarations are rewritten by rewrite_launches.py; anything else is an error.
#define __shared__ static_assert(false, "__shared__ outside a file rewritten by rewrite_launches.py");

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef struct CUstream_st* cudaStream_t;

namespace ember_cuda_host {

inline constexpr unsigned char kSharedPoison = 0xA5;
inline constexpr unsigned kFullMask = 0xffffffffu;

/// A kernel misused the execution model (divergent barrier, bad shuffle mask, ...).
struct KernelError : std::logic_error {
  using std::logic_error::logic_error;
};

struct ThreadContext {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
};
ThreadContext& context();

struct LaunchConfig {
  const char* kernel;  // the kernel expression as written, for messages
  bool fibers;         // the kernel's file uses block or warp synchronisation
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
};

/// Runs body() once per thread of the grid under `config`.
void run_grid(const LaunchConfig& config, void (*body)(void*), void* state);

/// What `kernel<<<grid, block, shared, stream>>>(args...)` becomes: the arguments are
/// evaluated once (as for a real launch) and every thread calls the kernel with copies.
struct Launch {
  LaunchConfig config;
  template <typename F, typename... Args>
  void operator()(F&& call_kernel, Args&&... args) const {
    auto state = std::make_tuple(std::decay_t<Args>(std::forward<Args>(args))...);
    struct Closure {
      F* f;
      decltype(state)* a;
    } closure{&call_kernel, &state};
    run_grid(
        config,
        [](void* p) {
          auto* c = static_cast<Closure*>(p);
          std::apply(*c->f, *c->a);  // the kernel takes its parameters by value: copies per thread
        },
        &closure);
  }
};
inline Launch launch(const char* kernel, bool fibers, dim3 grid, dim3 block, size_t shared = 0,
                     cudaStream_t stream = nullptr) {
  return Launch{{kernel, fibers, grid, block, shared, stream}};
}

// ---- synchronisation and warp intrinsics (need fibers) ---------------------------------
void syncthreads(const char* file, int line);
/// Lanes of `mask` exchange 8 bytes each; returns the value of lane `source` (own value when
/// `source` is outside the lane's segment of `width`).
uint64_t warp_exchange(unsigned mask, uint64_t value, int source, const char* what);
void syncwarp(unsigned mask);
unsigned ballot(unsigned mask, bool predicate);

// ---- shared memory (declarations rewritten by rewrite_launches.py) ----------------------
/// The storage of the __shared__ declaration `site` for the running block.
void* shared_storage(const void* site, size_t bytes, size_t align, const char* name);
/// The launch's dynamic shared memory (16-byte aligned, ending at its guard page).
void* dynamic_shared_storage();

/// `__shared__ alignas(A) T name[N];` becomes `auto& name = shared<T[N], A>("name", [] {});`:
/// the lambda's type makes one site per declaration (and per instantiation of its template).
template <typename T, size_t Align = alignof(T), typename Site>
T& shared(const char* name, Site) {
  static const char site = 0;
  return *static_cast<T*>(shared_storage(&site, sizeof(T), std::max(Align, alignof(T)), name));
}
/// `extern __shared__ T name[];` becomes `T* const name = dynamic_shared<T>();`.
template <typename T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_storage());
}

/// While alive, launches on this OS thread run only their first and last `count` blocks.
struct EdgeBlocksOnly {
  explicit EdgeBlocksOnly(unsigned count);
  ~EdgeBlocksOnly();
  EdgeBlocksOnly(const EdgeBlocksOnly&) = delete;
  EdgeBlocksOnly& operator=(const EdgeBlocksOnly&) = delete;
};

/// Clears the sticky kernel error (cudaDeviceReset for the tests).
void reset_device();

/// A device-side assert failed: report, abort the kernel, mark the context.
[[noreturn]] void device_assert_fail(const char* expr, const char* file, int line, const char* function);

template <typename T>
T shfl_impl(unsigned mask, T v, int source, const char* what) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = warp_exchange(mask, bits, source, what);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
inline int lane_id() {
  return static_cast<int>(context().thread_idx.x +
                          context().block_dim.x *
                              (context().thread_idx.y + context().block_dim.y * context().thread_idx.z)) %
         32;
}
inline int segment_source(int lane, int target, int width) {
  int base = lane - lane % width;
  return target >= base && target < base + width ? target : lane;
}

}  // namespace ember_cuda_host

#define threadIdx (::ember_cuda_host::context().thread_idx)
#define blockIdx (::ember_cuda_host::context().block_idx)
#define blockDim (::ember_cuda_host::context().block_dim)
#define gridDim (::ember_cuda_host::context().grid_dim)
#define warpSize 32
#define __syncthreads() ::ember_cuda_host::syncthreads(__FILE__, __LINE__)

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int lane = ::ember_cuda_host::lane_id();
  int target = lane - lane % width + ((src % width) + width) % width;
  return ::ember_cuda_host::shfl_impl(mask, v, target, "__shfl_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = ::ember_cuda_host::lane_id();
  return ::ember_cuda_host::shfl_impl(mask, v, ::ember_cuda_host::segment_source(lane, lane + int(delta), width),
                                      "__shfl_down_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = ::ember_cuda_host::lane_id();
  return ::ember_cuda_host::shfl_impl(mask, v, ::ember_cuda_host::segment_source(lane, lane - int(delta), width),
                                      "__shfl_up_sync");
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  int lane = ::ember_cuda_host::lane_id();
  return ::ember_cuda_host::shfl_impl(mask, v, ::ember_cuda_host::segment_source(lane, lane ^ lane_mask, width),
                                      "__shfl_xor_sync");
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::ember_cuda_host::syncwarp(mask); }
inline unsigned __ballot_sync(unsigned mask, int predicate) { return ::ember_cuda_host::ballot(mask, predicate != 0); }
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }

// ---- the device's global min/max overloads (math_functions.hpp) ------------------------
template <typename A, typename B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

// ---- atomics ----------------------------------------------------------------------------
template <typename T>
T atomicAdd(T* p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicSub(T* p, T v) {
  T old = *p;
  *p = old - v;
  return old;
}
template <typename T>
T atomicExch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <typename T>
T atomicMin(T* p, T v) {
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <typename T>
T atomicAnd(T* p, T v) {
  T old = *p;
  *p = old & v;
  return old;
}
template <typename T>
T atomicOr(T* p, T v) {
  T old = *p;
  *p = old | v;
  return old;
}
template <typename T>
T atomicCAS(T* p, T compare, T v) {
  T old = *p;
  if (old == compare) *p = v;
  return old;
}
