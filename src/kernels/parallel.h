// A small persistent thread pool for splitting large kernels (Note [CPU parallelism]).
//
// Note [CPU parallelism]
// Like LibTorch's at::parallel_for, work above a grain size (kGrainSize elements) is
// cut into at most num_threads() contiguous chunks. The pool is shared by every caller:
// the cpu backend's thread and every emulated stream worker call kernels at once. One
// parallel region runs at a time; a caller that finds the pool busy, or that is itself
// a pool worker, runs its whole range inline, so there is no waiting on the pool and
// no deadlock. Chunk boundaries never affect results: reductions combine fixed-size
// blocks (cpu_reduce.cpp), random ops number elements globally.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace ember::detail {

inline constexpr int64_t kGrainSize = 32768;

/// Threads the pool uses (including the caller): EMBER_NUM_THREADS, else
/// OMP_NUM_THREADS, else std::thread::hardware_concurrency().
int num_threads();

/// A non-owning reference to a callable void(int64_t begin, int64_t end).
class RangeFn {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_const_t<F>, RangeFn>)  // copies stay copies
      RangeFn(F& f)                                           // NOLINT
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

/// Calls fn(b, e) over disjoint chunks covering [begin, end), possibly on several threads,
/// and returns when all are done. The first exception thrown by a chunk is rethrown.
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain, RangeFn fn);

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  if (end - begin <= grain) {
    if (end > begin) fn(begin, end);
    return;
  }
  parallel_for_impl(begin, end, grain, RangeFn(fn));
}

}  // namespace ember::detail
