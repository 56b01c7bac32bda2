// The runner of the host execution layer (design notes in cuda_host.h).
#include "cuda_host.h"

#include <sys/mman.h>
#include <setjmp.h>
#include <ucontext.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMBER_HOST_ASAN 1
#else
#define EMBER_HOST_ASAN 0
#endif
// Without ASan, a fiber starts with setcontext and later switches are _setjmp/_longjmp,
// which (unlike swapcontext) make no sigprocmask system call. Under ASan every switch is a
// swapcontext, annotated.
#define EMBER_HOST_JMP (!EMBER_HOST_ASAN)

extern "C" unsigned char __start_ember_cuda_shared[];  // NOLINT: linker-provided section bounds
extern "C" unsigned char __stop_ember_cuda_shared[];
// Keeps the section (and its bounds) present when no kernel file declares shared memory.
__attribute__((section("ember_cuda_shared"), used)) static unsigned char shared_anchor[1];

namespace ember_cuda_host {
namespace {

struct KernelAbort {};  // unwinds a plain-mode thread after a device assert

enum class State { Ready, AtBarrier, AtWarp, Done };

struct Fiber {
  ucontext_t context;
  char* stack = nullptr;
  State state = State::Ready;
  ThreadContext ctx;
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  unsigned warp_generation = 0;
  void* fake_stack = nullptr;
  bool started = false;
  jmp_buf jump;
};

struct Warp {
  unsigned generation = 0;
  unsigned arrived = 0;  // lanes arrived at the current exchange
  unsigned mask = 0;     // the mask of the current exchange
  uint64_t values[2][32] = {};
};

struct Block {
  const LaunchConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* state = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  ucontext_t scheduler;
  jmp_buf scheduler_jump;
  Fiber* current = nullptr;
  bool aborted = false;  // a device assert fired
  std::string error;     // a KernelError raised by a fiber
  const void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
};

constexpr size_t kStackBytes = EMBER_HOST_ASAN ? 512 * 1024 : 128 * 1024;

thread_local ThreadContext plain_context;
thread_local ThreadContext* current_context = &plain_context;
thread_local Block* current_block = nullptr;
cudaError_t pending_error = cudaSuccess;  // a kernel error not yet observed by a synchronisation
cudaError_t sticky_error = cudaSuccess;   // a kernel error once observed: stays until reset_device
cudaError_t last_error = cudaSuccess;     // what cudaGetLastError returns

std::string where(const LaunchConfig& c) { return std::string("kernel ") + c.kernel + ": "; }

// Not instrumented: under ASan the section may hold redzones between the variables, and
// those must stay poisoned for ASan (so an out-of-range shared access is its report).
__attribute__((no_sanitize("address"))) void poison_shared() {
  for (unsigned char* p = __start_ember_cuda_shared; p != __stop_ember_cuda_shared; ++p) *p = kSharedPoison;
}

// Switches to the scheduler; returns when the scheduler resumes this fiber.
void yield() {
  Block& b = *current_block;
  Fiber& f = *b.current;
#if EMBER_HOST_JMP
  if (_setjmp(f.jump) == 0) _longjmp(b.scheduler_jump, 1);
#else
#if EMBER_HOST_ASAN
  __sanitizer_start_switch_fiber(&f.fake_stack, b.main_stack_bottom, b.main_stack_size);
#endif
  swapcontext(&f.context, &b.scheduler);
#endif
#if EMBER_HOST_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &b.main_stack_bottom, &b.main_stack_size);
#endif
}

void fiber_main() {
  Block& b = *current_block;
#if EMBER_HOST_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b.main_stack_bottom, &b.main_stack_size);
#endif
  try {
    b.body(b.state);
  } catch (const KernelAbort&) {
    b.aborted = true;
  } catch (const KernelError& e) {
    b.error = e.what();
  }
  b.current->state = State::Done;
#if EMBER_HOST_ASAN
  __sanitizer_start_switch_fiber(nullptr, b.main_stack_bottom, b.main_stack_size);
#endif
#if EMBER_HOST_JMP
  _longjmp(b.scheduler_jump, 1);
#else
  setcontext(&b.scheduler);
#endif
}

void resume(Block& b, Fiber& f) {
  b.current = &f;
  current_context = &f.ctx;
  f.state = State::Ready;
  void* fake = nullptr;
#if EMBER_HOST_ASAN
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
#if EMBER_HOST_JMP
  if (_setjmp(b.scheduler_jump) == 0) {
    if (!f.started) {
      f.started = true;
      setcontext(&f.context);
    }
    _longjmp(f.jump, 1);
  }
#else
  swapcontext(&b.scheduler, &f.context);
#endif
#if EMBER_HOST_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  (void)fake;
  current_context = &plain_context;
}

void run_block_fibers(Block& b) {
  for (Fiber& f : b.fibers) {
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
    f.state = State::Ready;
    f.started = false;
  }
  for (Warp& w : b.warps) w = Warp{};
  const LaunchConfig& c = *b.config;
  while (true) {
    bool progressed = false, all_done = true;
    for (Fiber& f : b.fibers) {
      if (f.state == State::Done) continue;
      all_done = false;
      bool runnable = f.state == State::Ready ||
                      (f.state == State::AtWarp && b.warps[(&f - b.fibers.data()) / 32].generation != f.warp_generation);
      if (!runnable) continue;
      resume(b, f);
      progressed = true;
      if (b.aborted) return;
      if (!b.error.empty()) throw KernelError(where(c) + b.error);
    }
    if (all_done) return;
    if (progressed) continue;
    // Nobody can move: every live thread waits at a barrier or a warp exchange.
    size_t done = 0, at_warp = 0;
    const Fiber* first = nullptr;
    for (const Fiber& f : b.fibers) {
      if (f.state == State::Done) ++done;
      else if (f.state == State::AtWarp) ++at_warp;
      else if (first == nullptr) first = &f;
    }
    if (at_warp > 0) {
      throw KernelError(where(c) + "a warp-synchronous call waits for lanes of its mask that exited or wait elsewhere");
    }
    for (const Fiber& f : b.fibers) {
      if (f.state == State::AtBarrier && (f.barrier_line != first->barrier_line ||
                                          std::strcmp(f.barrier_file, first->barrier_file) != 0)) {
        throw KernelError(where(c) + "divergent __syncthreads: threads wait at " + first->barrier_file + ":" +
                          std::to_string(first->barrier_line) + " and at " + f.barrier_file + ":" +
                          std::to_string(f.barrier_line));
      }
    }
    if (done > 0) {
      throw KernelError(where(c) + "divergent __syncthreads at " + first->barrier_file + ":" +
                        std::to_string(first->barrier_line) + ": " + std::to_string(done) + " of " +
                        std::to_string(b.fibers.size()) + " threads of block (" +
                        std::to_string(first->ctx.block_idx.x) + ", " + std::to_string(first->ctx.block_idx.y) +
                        ", " + std::to_string(first->ctx.block_idx.z) + ") exited without reaching it");
    }
    for (Fiber& f : b.fibers) f.state = State::Ready;  // release the barrier
  }
}

Fiber& current_fiber(const char* what) {
  if (current_block == nullptr || current_block->current == nullptr) {
    throw KernelError(std::string(what) + " called outside a kernel run with fibers (its .cu file was "
                      "rewritten without block synchronisation)");
  }
  return *current_block->current;
}

}  // namespace

ThreadContext& context() { return *current_context; }

void run_grid(const LaunchConfig& c, void (*body)(void*), void* state) {
  uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  if (threads == 0 || threads > 1024 || c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.y > 65535 ||
      c.grid.z > 65535 || c.block.z > 64 || c.shared > 48 * 1024) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (sticky_error != cudaSuccess || pending_error != cudaSuccess) return;  // a failed context runs nothing
  Block b;
  b.config = &c;
  b.body = body;
  b.state = state;
  if (c.fibers) {
    b.fibers.resize(threads);
    b.warps.resize((threads + 31) / 32);
    // Stacks are kept per OS thread and reused by later launches (mapping and first-touching
    // them per launch dominated the run time).
    static thread_local std::vector<char*> stack_pool;
    while (stack_pool.size() < threads) {
      void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      stack_pool.push_back(static_cast<char*>(p));
    }
    for (size_t t = 0; t < threads; ++t) b.fibers[t].stack = stack_pool[t];
  }
  struct Cleanup {
    Block& b;
    ~Cleanup() {
      current_block = nullptr;
      current_context = &plain_context;
    }
  } cleanup{b};
  current_block = c.fibers ? &b : nullptr;
  for (unsigned bz = 0; bz < c.grid.z; ++bz) {
    for (unsigned by = 0; by < c.grid.y; ++by) {
      for (unsigned bx = 0; bx < c.grid.x; ++bx) {
        poison_shared();
        size_t t = 0;
        for (unsigned tz = 0; tz < c.block.z; ++tz) {
          for (unsigned ty = 0; ty < c.block.y; ++ty) {
            for (unsigned tx = 0; tx < c.block.x; ++tx, ++t) {
              ThreadContext ctx{dim3(tx, ty, tz), dim3(bx, by, bz), c.block, c.grid};
              if (c.fibers) {
                b.fibers[t].ctx = ctx;
                continue;
              }
              plain_context = ctx;
              try {
                body(state);
              } catch (const KernelAbort&) {
                return;
              }
            }
          }
        }
        if (c.fibers) {
          run_block_fibers(b);
          if (b.aborted) return;
        }
      }
    }
  }
}

void syncthreads(const char* file, int line) {
  Fiber& f = current_fiber("__syncthreads");
  f.state = State::AtBarrier;
  f.barrier_file = file;
  f.barrier_line = line;
  yield();
}

uint64_t warp_exchange(unsigned mask, uint64_t value, int source, const char* what) {
  Fiber& f = current_fiber(what);
  Block& b = *current_block;
  size_t index = static_cast<size_t>(&f - b.fibers.data());
  Warp& w = b.warps[index / 32];
  int lane = static_cast<int>(index % 32);
  if ((mask >> lane & 1u) == 0) throw KernelError(std::string(what) + " called by lane " + std::to_string(lane) +
                                                  " which is not in its mask");
  size_t warp_lanes = std::min<size_t>(32, b.fibers.size() - index / 32 * 32);
  if (warp_lanes < 32 && (mask >> warp_lanes) != 0) {
    throw KernelError(std::string(what) + ": mask names lanes beyond the block's last warp");
  }
  if (w.arrived != 0 && w.mask != mask) {
    throw KernelError(std::string(what) + ": lanes of one warp use different masks");
  }
  unsigned generation = w.generation;
  w.mask = mask;
  w.values[generation % 2][lane] = value;
  if (++w.arrived == static_cast<unsigned>(__builtin_popcount(mask))) {
    w.arrived = 0;
    ++w.generation;
  } else {
    f.state = State::AtWarp;
    f.warp_generation = generation;
    yield();
  }
  if (source < 0 || source >= 32) source = lane;
  if ((mask >> source & 1u) == 0) {
    throw KernelError(std::string(what) + ": lane " + std::to_string(lane) + " reads lane " +
                      std::to_string(source) + " which is not in the mask");
  }
  return w.values[generation % 2][source];
}

void syncwarp(unsigned mask) {
  (void)warp_exchange(mask, 0, -1, "__syncwarp");
}

unsigned ballot(unsigned mask, bool predicate) {
  Fiber& f = current_fiber("__ballot_sync");
  Block& b = *current_block;
  size_t index = static_cast<size_t>(&f - b.fibers.data());
  Warp& w = b.warps[index / 32];
  unsigned generation = w.generation;
  (void)warp_exchange(mask, predicate ? 1 : 0, -1, "__ballot_sync");
  unsigned result = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) && w.values[generation % 2][lane] != 0) result |= 1u << lane;
  }
  return result;
}

void device_assert_fail(const char* expr, const char* file, int line, const char* function) {
  const ThreadContext& t = context();
  std::fprintf(stderr, "%s:%d: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n", file, line,
               function, t.block_idx.x, t.block_idx.y, t.block_idx.z, t.thread_idx.x, t.thread_idx.y,
               t.thread_idx.z, expr);
  pending_error = cudaErrorAssert;
  throw KernelAbort{};
}

void reset_device() {
  sticky_error = pending_error = last_error = cudaSuccess;
}

}  // namespace ember_cuda_host

// ---- the runtime API subset ------------------------------------------------------------
using ember_cuda_host::last_error;
using ember_cuda_host::pending_error;
using ember_cuda_host::sticky_error;

cudaError_t cudaGetLastError() {
  cudaError_t e = last_error != cudaSuccess ? last_error : sticky_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error != cudaSuccess ? last_error : sticky_error; }
const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "unspecified launch failure";
  }
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  if (pending_error != cudaSuccess) sticky_error = pending_error;
  return sticky_error;
}
cudaError_t cudaDeviceSynchronize() { return cudaStreamSynchronize(nullptr); }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  // Two multiprocessors: grid_blocks caps grids at 64 blocks, so grid-stride loops run
  // several iterations per thread in the tests' larger cases.
  *value = attr == cudaDevAttrMultiProcessorCount ? 2 : 1000000;
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  if (sticky_error != cudaSuccess) return sticky_error;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
const char* cublasGetStatusString(cublasStatus_t) { return "CUBLAS_STATUS_SUCCESS"; }
