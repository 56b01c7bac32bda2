// The sanitizer's switch (ember::cuda::sanitizer, EMBER_CUDA_SANITIZER) and allocator hooks.
#include "sanitizer/sanitizer.h"

#include <cstdio>

#include "core/host_access.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/sanitizer.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"
#include "runtime/backend.h"
#include "runtime/env.h"
#include "runtime/registry.h"
#include "sanitizer/sanitizing_backend.h"

namespace ember::detail::sanitizer {

std::atomic<bool> g_enabled{false};

namespace {

std::atomic<cuda::sanitizer::Mode> g_mode{cuda::sanitizer::Mode::Error};
std::atomic<long> g_warnings{0};
std::atomic<bool> g_set_by_program{false};  // enable()/disable() called: the environment yields

}  // namespace

SanitizerState& state() {
  static auto* s = new SanitizerState();  // never destroyed: streams may be freed during exit
  return *s;
}

void note_warning() noexcept { g_warnings.fetch_add(1, std::memory_order_relaxed); }

Backend& wrap(Backend& upstream) {
  static auto* decorator = new SanitizingBackend(upstream);  // the runtime's backend is never replaced
  EMBER_ASSERT(&decorator->upstream() == &upstream);
  return *decorator;
}

void on_deallocation(const void* ptr, size_t bytes, const void* owner,
                     const std::vector<const void*>& waited) noexcept {
  std::vector<StreamKey> keys;
  for (const void* stream : waited) keys.push_back(reinterpret_cast<StreamKey>(stream));
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  s.detector.block_freed(reinterpret_cast<uintptr_t>(ptr), bytes, reinterpret_cast<StreamKey>(owner), keys);
}

void on_release(const void* ptr, size_t bytes, int device) noexcept {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  if (device >= 0) s.detector.device_synchronize(device);  // cudaFree waits for the device
  s.detector.memory_deallocation(reinterpret_cast<uintptr_t>(ptr), bytes);
}

// Note [Host accesses]
// Emulated device memory and pinned memory are host memory, and the host touches
// pinned memory directly: cpu ops on pinned tensors, and what the accessors give the
// program (data_ptr() is taken as a write, as PyTorch 2.x's mutable data_ptr; item()
// and to_vector() read). A non_blocking copy from pinned memory still reading it, or one
// into pinned memory still writing it, then races with the host. These accesses are
// checked like a stream's, against what the host has synchronised with (the host
// clock of Note [Stream race detection]), and reported with the host as the current
// side. They are not recorded: stream work the host issues later is ordered after them.
// Internal code that hands a pinned pointer to a stream (copies, launch operands)
// reads TensorImpl::data() instead, so only the host's own accesses are checked.
void on_host_access(const TensorArg& arg, bool write, const char* op, const char* argument, int index) {
  std::vector<MemoryAccess> accesses{access_of(arg, write ? AccessType::Write : AccessType::Read, argument, index)};
  check_host_accesses(accesses, op);
}

void on_host_launch(const KernelCall& call) {
  std::vector<MemoryAccess> accesses;
  accesses.reserve(call.outputs.size() + call.inputs.size());
  add_operands(accesses, call.outputs, AccessType::Write, "output");
  add_operands(accesses, call.inputs, AccessType::Read, "input");
  check_host_accesses(accesses, op_name(call.op));
}

void check_host_accesses(const std::vector<MemoryAccess>& accesses, const char* op) {
  std::string report;
  {
    SanitizerState& s = state();
    std::lock_guard lock(s.mutex);
    std::vector<DataRace> races = s.detector.check_host(accesses, op);
    if (races.empty()) return;
    auto stack = std::make_shared<const StackTrace>(StackTrace::capture(3));
    for (DataRace& race : races) race.current.stack = stack;
    report = format_races(races, undecorated_backend());
  }
  if (cuda::sanitizer::mode() == cuda::sanitizer::Mode::Error) throw DataRaceError(report);
  std::fprintf(stderr, "============================\n%s", report.c_str());
  note_warning();
}

void configure_from_env() {
  if (!g_set_by_program.load()) apply_env();
}

namespace {
// Note [Sanitizer hooks] in runtime/registry.h. The library is one shared object, so this
// file's initializer runs when it loads (and the allocators' references to g_enabled keep
// this file in any link); priority 101 runs it before every initializer that may select a
// backend.
struct InstallSelectionHook {
  InstallSelectionHook() noexcept { set_backend_selection_hook(&configure_from_env); }
};
[[gnu::init_priority(101)]] const InstallSelectionHook g_install_selection_hook;
}  // namespace

void apply_env() {
  std::optional<std::string> value = env_value("EMBER_CUDA_SANITIZER");
  if (!value || value->empty() || *value == "0") return;
  if (*value == "1") {
    cuda::sanitizer::enable(cuda::sanitizer::Mode::Error);
  } else if (*value == "warn") {
    cuda::sanitizer::enable(cuda::sanitizer::Mode::Warn);
  } else {
    fail<ValueError>("EMBER_CUDA_SANITIZER must be 1, warn or 0, but got '", *value, "'");
  }
}

}  // namespace ember::detail::sanitizer

namespace ember::cuda::sanitizer {

namespace impl = detail::sanitizer;

namespace {
// Note [Host access hook] in src/core/host_access.h.
void pinned_data_ptr_access(const detail::TensorImpl& impl, bool write, const char* op) {
  impl::on_host_access(detail::TensorArg{impl.data(), impl.dtype(), impl.sizes(), impl.strides()}, write, op, "self");
}
}  // namespace

void enable(Mode mode) {
  impl::g_set_by_program.store(true);
  impl::SanitizerState& s = impl::state();
  std::lock_guard lock(s.mutex);
  s.detector.reset();
  impl::g_mode.store(mode, std::memory_order_relaxed);
  impl::g_warnings.store(0, std::memory_order_relaxed);
  impl::g_enabled.store(true, std::memory_order_release);
  detail::set_backend_decorator(&impl::wrap);
  detail::g_pinned_host_access_hook.store(&pinned_data_ptr_access, std::memory_order_release);
}

void disable() {
  impl::g_set_by_program.store(true);
  impl::g_enabled.store(false, std::memory_order_release);
  detail::set_backend_decorator(nullptr);
  detail::g_pinned_host_access_hook.store(nullptr, std::memory_order_release);
}

bool is_enabled() noexcept { return impl::enabled(); }

Mode mode() noexcept { return impl::g_mode.load(std::memory_order_relaxed); }

long warnings() noexcept { return impl::g_warnings.load(std::memory_order_relaxed); }

}  // namespace ember::cuda::sanitizer
