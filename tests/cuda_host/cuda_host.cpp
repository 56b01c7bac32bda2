// The runner of the host execution layer (design notes in cuda_host.h).
#include "cuda_host.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMBER_HOST_ASAN 1
#else
#define EMBER_HOST_ASAN 0
#endif

namespace ember_cuda_host {
namespace {

struct KernelAbort {};  // unwinds a thread after a device assert

enum class State { Ready, AtBarrier, AtWarp, Done };

// A thread of the running block (run as a fiber).
struct Fiber {
  State state = State::Ready;
  ThreadContext ctx;
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  unsigned warp_generation = 0;
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
  Fiber* current = nullptr;
  bool aborted = false;  // a device assert fired
  std::string error;     // a KernelError raised by a fiber
};

// A persistent fiber of the OS thread: made once with makecontext, it runs the threads of
// block after block, parked at the top of its loop in between. Switches are _setjmp/_longjmp
// (no signal-mask system call, unlike swapcontext), annotated for AddressSanitizer.
struct Slot {
  char* stack = nullptr;
  jmp_buf jump;                // where the slot goes on: parked, or inside the kernel
  void* fake_stack = nullptr;  // ASan's, while switched away
  bool parked = false;         // false: never made, or abandoned by a failed block
};

constexpr size_t kStackBytes = EMBER_HOST_ASAN ? 512 * 1024 : 128 * 1024;

thread_local ThreadContext plain_context;
thread_local ThreadContext* current_context = &plain_context;
thread_local Block block;
thread_local bool in_fibers = false;  // the OS thread runs a block's fibers
thread_local std::deque<Slot> slots;  // grows at the end only: parked fibers keep references
thread_local size_t current_slot = 0;
thread_local jmp_buf scheduler_jump;
thread_local void* scheduler_fake_stack = nullptr;
thread_local const void* main_stack_bottom = nullptr;
thread_local size_t main_stack_size = 0;
thread_local unsigned edge_blocks = 0;    // EdgeBlocksOnly
cudaError_t pending_error = cudaSuccess;  // a kernel error not yet observed by a synchronisation
cudaError_t sticky_error = cudaSuccess;   // a kernel error once observed: stays until reset_device
cudaError_t last_error = cudaSuccess;     // what cudaGetLastError returns
thread_local int current_device = 0;

std::string where(const LaunchConfig& c) { return std::string("kernel ") + c.kernel + ": "; }

inline void asan_start_switch(void** fake_stack, const void* bottom, size_t size) {
#if EMBER_HOST_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}
inline void asan_finish_switch(void* fake_stack, const void** bottom, size_t* size) {
#if EMBER_HOST_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

// ---- shared memory: each variable ends at a guard page --------------------------------
//
// Every __shared__ declaration (per site, per OS thread) and the launch's dynamic shared
// memory get their own mapping whose last byte is followed by a PROT_NONE page. A block
// first touching a region fills it with kSharedPoison. An access past the end faults on
// the guard page; the SIGSEGV handler turns that into a KernelError naming the kernel.

struct Region {
  char* base = nullptr;  // the variable's first byte
  size_t bytes = 0;
  char* guard = nullptr;  // the PROT_NONE page after it
  size_t mapped = 0;
  uint64_t poisoned_for = 0;  // the block serial it was last poisoned for
  const char* name = "";
};

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
thread_local std::unordered_map<const void*, Region> static_regions;  // by declaration site
thread_local Region dynamic_region;
thread_local uint64_t block_serial = 0;
thread_local sigjmp_buf fault_jump;
thread_local char fault_message[256];
struct sigaction previous_segv;

Region map_region(size_t bytes, size_t align, const char* name) {
  Region r;
  const size_t body = (bytes + align + kPage - 1) / kPage * kPage;
  r.mapped = body + kPage;
  void* p = mmap(nullptr, r.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  r.guard = static_cast<char*>(p) + body;
  mprotect(r.guard, kPage, PROT_NONE);
  r.base = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(r.guard - bytes) & ~(uintptr_t(align) - 1));
  r.bytes = bytes;
  r.name = name;
  return r;
}

const Region* guard_region(const char* address) {
  if (dynamic_region.guard && address >= dynamic_region.guard && address < dynamic_region.guard + kPage) {
    return &dynamic_region;
  }
  for (const auto& [site, r] : static_regions) {
    if (address >= r.guard && address < r.guard + kPage) return &r;
  }
  return nullptr;
}

void on_segv(int signal, siginfo_t* info, void* context) {
  const char* address = static_cast<const char*>(info->si_addr);
  const Region* r = block.config != nullptr ? guard_region(address) : nullptr;
  if (r == nullptr) {  // not ours: let the previous handler (or the default) see it again
    sigaction(SIGSEGV, &previous_segv, nullptr);
    return;
  }
  std::snprintf(fault_message, sizeof fault_message,
                "out-of-range shared memory access: byte %zu of %s, which has %zu bytes",
                static_cast<size_t>(address - r->base), r->name, r->bytes);
  if (in_fibers) asan_start_switch(nullptr, main_stack_bottom, main_stack_size);
  siglongjmp(fault_jump, 1);
  (void)signal, (void)context;
}

void install_segv_handler() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: the handler leaves by siglongjmp
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv);
    return true;
  }();
  (void)installed;
}

void poison(Region& r) {
  if (r.poisoned_for == block_serial) return;
  std::memset(r.base, kSharedPoison, r.bytes);
  r.poisoned_for = block_serial;
}

// ---- fibers ---------------------------------------------------------------------------

// Parks the running slot (or leaves it at a barrier): back to the scheduler, until resumed.
void switch_to_scheduler() {
  Slot& s = slots[current_slot];
  if (_setjmp(s.jump) == 0) {
    asan_start_switch(&s.fake_stack, main_stack_bottom, main_stack_size);
    _longjmp(scheduler_jump, 1);
  }
  asan_finish_switch(s.fake_stack, &main_stack_bottom, &main_stack_size);
}

void slot_main() {
  asan_finish_switch(nullptr, &main_stack_bottom, &main_stack_size);
  while (true) {
    slots[current_slot].parked = true;
    switch_to_scheduler();
    try {
      block.body(block.state);
    } catch (const KernelAbort&) {
      block.aborted = true;
    } catch (const KernelError& e) {
      block.error = e.what();
    }
    block.current->state = State::Done;
  }
}

void make_slot(size_t t) {
  Slot& s = slots[t];
  if (s.stack == nullptr) {
    void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    s.stack = static_cast<char*>(p);
  }
#if EMBER_HOST_ASAN
  ASAN_UNPOISON_MEMORY_REGION(s.stack, kStackBytes);  // redzones of frames a failed block abandoned
#endif
  ucontext_t start;
  getcontext(&start);
  start.uc_stack.ss_sp = s.stack;
  start.uc_stack.ss_size = kStackBytes;
  start.uc_link = nullptr;
  makecontext(&start, slot_main, 0);
  current_slot = t;
  if (_setjmp(scheduler_jump) == 0) {
    asan_start_switch(&scheduler_fake_stack, s.stack, kStackBytes);
    setcontext(&start);
  }
  asan_finish_switch(scheduler_fake_stack, nullptr, nullptr);
}

void resume(size_t t) {
  Fiber& f = block.fibers[t];
  block.current = &f;
  current_context = &f.ctx;
  current_slot = t;
  f.state = State::Ready;
  if (_setjmp(scheduler_jump) == 0) {
    asan_start_switch(&scheduler_fake_stack, slots[t].stack, kStackBytes);
    _longjmp(slots[t].jump, 1);
  }
  asan_finish_switch(scheduler_fake_stack, nullptr, nullptr);
  current_context = &plain_context;
}

void run_block_fibers() {
  Block& b = block;
  const LaunchConfig& c = *b.config;
  if (slots.size() < b.fibers.size()) slots.resize(b.fibers.size());
  for (size_t t = 0; t < b.fibers.size(); ++t) {
    if (!slots[t].parked) make_slot(t);
    b.fibers[t].state = State::Ready;
  }
  for (Warp& w : b.warps) w = Warp{};
  in_fibers = true;
  struct Leave {  // threads left inside the kernel (an error) abandon their slots
    ~Leave() {
      in_fibers = false;
      for (size_t t = 0; t < block.fibers.size(); ++t) {
        if (block.fibers[t].state != State::Done) slots[t].parked = false;
      }
    }
  } leave;
  while (true) {
    bool progressed = false, all_done = true;
    for (size_t t = 0; t < b.fibers.size(); ++t) {
      Fiber& f = b.fibers[t];
      if (f.state == State::Done) continue;
      all_done = false;
      bool runnable =
          f.state == State::Ready || (f.state == State::AtWarp && b.warps[t / 32].generation != f.warp_generation);
      if (!runnable) continue;
      resume(t);
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
      if (f.state == State::AtBarrier &&
          (f.barrier_line != first->barrier_line || std::strcmp(f.barrier_file, first->barrier_file) != 0)) {
        throw KernelError(where(c) + "divergent __syncthreads: threads wait at " + first->barrier_file + ":" +
                          std::to_string(first->barrier_line) + " and at " + f.barrier_file + ":" +
                          std::to_string(f.barrier_line));
      }
    }
    if (done > 0) {
      throw KernelError(where(c) + "divergent __syncthreads at " + first->barrier_file + ":" +
                        std::to_string(first->barrier_line) + ": " + std::to_string(done) + " of " +
                        std::to_string(b.fibers.size()) + " threads of block (" +
                        std::to_string(first->ctx.block_idx.x) + ", " + std::to_string(first->ctx.block_idx.y) + ", " +
                        std::to_string(first->ctx.block_idx.z) + ") exited without reaching it");
    }
    for (Fiber& f : b.fibers) f.state = State::Ready;  // release the barrier
  }
}

Fiber& current_fiber(const char* what) {
  if (!in_fibers || block.current == nullptr) {
    throw KernelError(std::string(what) +
                      " called outside a kernel run with fibers (its .cu file was "
                      "rewritten without block synchronisation)");
  }
  return *block.current;
}

// Runs the grid's blocks (all, or the first and last edge_blocks).
void run_blocks(const LaunchConfig& c, void (*body)(void*), void* state) {
  Block& b = block;
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  const uint64_t blocks = uint64_t(c.grid.x) * c.grid.y * c.grid.z;
  b.body = body;
  b.state = state;
  b.aborted = false;
  b.error.clear();
  b.fibers.assign(c.fibers ? threads : 0, Fiber{});
  b.warps.assign(c.fibers ? (threads + 31) / 32 : 0, Warp{});
  for (uint64_t linear = 0; linear < blocks; ++linear) {
    if (edge_blocks != 0 && linear >= edge_blocks && linear < blocks - std::min<uint64_t>(blocks, edge_blocks)) {
      linear = blocks - edge_blocks - 1;  // skip to the last ones
      continue;
    }
    const dim3 block_idx(static_cast<unsigned>(linear % c.grid.x), static_cast<unsigned>(linear / c.grid.x % c.grid.y),
                         static_cast<unsigned>(linear / c.grid.x / c.grid.y));
    ++block_serial;
    if (dynamic_region.base != nullptr && c.shared > 0) poison(dynamic_region);
    size_t t = 0;
    for (unsigned tz = 0; tz < c.block.z; ++tz) {
      for (unsigned ty = 0; ty < c.block.y; ++ty) {
        for (unsigned tx = 0; tx < c.block.x; ++tx, ++t) {
          ThreadContext ctx{dim3(tx, ty, tz), block_idx, c.block, c.grid};
          if (c.fibers) {
            b.fibers[t].ctx = ctx;
            continue;
          }
          plain_context = ctx;
          try {
            body(state);
          } catch (const KernelAbort&) {
            return;
          } catch (const KernelError& e) {
            throw KernelError(where(c) + e.what());
          }
        }
      }
    }
    if (c.fibers) {
      run_block_fibers();
      if (b.aborted) return;
    }
  }
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
  if (c.shared > 0 && (dynamic_region.base == nullptr || c.shared + 16 > dynamic_region.mapped - kPage)) {
    if (dynamic_region.base != nullptr)
      munmap(dynamic_region.guard + kPage - dynamic_region.mapped, dynamic_region.mapped);
    install_segv_handler();
    dynamic_region = map_region(c.shared, 16, "the dynamic shared memory");
  }
  if (dynamic_region.base != nullptr) {  // this launch's size, at the guard page
    dynamic_region.base =
        reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(dynamic_region.guard - c.shared) & ~uintptr_t(15));
    dynamic_region.bytes = c.shared;
    dynamic_region.poisoned_for = 0;
  }
  block.config = &c;
  struct Reset {
    ~Reset() {
      block.config = nullptr;
      block.current = nullptr;
      current_context = &plain_context;
    }
  } reset;
  if (sigsetjmp(fault_jump, 0) != 0) {  // a shared-memory access hit a guard page
    if (in_fibers) {
      asan_finish_switch(nullptr, nullptr, nullptr);
      in_fibers = false;
      for (size_t t = 0; t < block.fibers.size(); ++t) slots[t].parked = false;  // all abandoned
    }
    throw KernelError(where(c) + fault_message);
  }
  run_blocks(c, body, state);
}

void* shared_storage(const void* site, size_t bytes, size_t align, const char* name) {
  auto found = static_regions.find(site);
  if (found == static_regions.end()) {
    install_segv_handler();
    found = static_regions.emplace(site, map_region(bytes, align, name)).first;
  }
  poison(found->second);
  return found->second.base;
}

void* dynamic_shared_storage() {
  if (block.config == nullptr || block.config->shared == 0) return dynamic_region.guard;  // no bytes: any access faults
  poison(dynamic_region);
  return dynamic_region.base;
}

EdgeBlocksOnly::EdgeBlocksOnly(unsigned count) { edge_blocks = count; }
EdgeBlocksOnly::~EdgeBlocksOnly() { edge_blocks = 0; }

void syncthreads(const char* file, int line) {
  Fiber& f = current_fiber("__syncthreads");
  f.state = State::AtBarrier;
  f.barrier_file = file;
  f.barrier_line = line;
  switch_to_scheduler();
}

uint64_t warp_exchange(unsigned mask, uint64_t value, int source, const char* what) {
  Fiber& f = current_fiber(what);
  Block& b = block;
  size_t index = static_cast<size_t>(&f - b.fibers.data());
  Warp& w = b.warps[index / 32];
  int lane = static_cast<int>(index % 32);
  if ((mask >> lane & 1u) == 0)
    throw KernelError(std::string(what) + " called by lane " + std::to_string(lane) + " which is not in its mask");
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
    switch_to_scheduler();
  }
  if (source < 0 || source >= 32) source = lane;
  if ((mask >> source & 1u) == 0) {
    throw KernelError(std::string(what) + ": lane " + std::to_string(lane) + " reads lane " + std::to_string(source) +
                      " which is not in the mask");
  }
  return w.values[generation % 2][source];
}

void syncwarp(unsigned mask) { (void)warp_exchange(mask, 0, -1, "__syncwarp"); }

unsigned ballot(unsigned mask, bool predicate) {
  Fiber& f = current_fiber("__ballot_sync");
  size_t index = static_cast<size_t>(&f - block.fibers.data());
  Warp& w = block.warps[index / 32];
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
               function, t.block_idx.x, t.block_idx.y, t.block_idx.z, t.thread_idx.x, t.thread_idx.y, t.thread_idx.z,
               expr);
  pending_error = cudaErrorAssert;
  throw KernelAbort{};
}

void reset_device() { sticky_error = pending_error = last_error = cudaSuccess; }

}  // namespace ember_cuda_host

// ---- the runtime API subset ------------------------------------------------------------
using ember_cuda_host::last_error;
using ember_cuda_host::pending_error;
using ember_cuda_host::sticky_error;

// The host layer never captures; the calling thread's mode is kept so that an exchange
// hands back what was set, as CUDA's does.
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  std::swap(current, *mode);
  return cudaSuccess;
}

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
  *device = ember_cuda_host::current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0 && device != 1) return cudaErrorInvalidDevice;
  ember_cuda_host::current_device = device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  // Device 0 has two multiprocessors: grid_blocks caps grids at 64 blocks, so grid-stride
  // loops run several iterations per thread in the tests' larger cases. Device 1 has 2^20:
  // one iteration per thread up to 2^33 elements, for launches run by EdgeBlocksOnly.
  *value = attr == cudaDevAttrMultiProcessorCount ? (device == 1 ? 1 << 20 : 2) : 1000000;
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
