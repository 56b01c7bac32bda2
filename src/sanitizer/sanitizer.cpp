// The sanitizer's switch (ember::cuda::sanitizer, EMBER_CUDA_SANITIZER) and allocator hooks.
#include "sanitizer/sanitizer.h"

#include "ember/errors.h"
#include "ember/sanitizer.h"
#include "runtime/env.h"
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

void on_allocation(const void* ptr, size_t bytes) noexcept {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  s.detector.memory_allocation(reinterpret_cast<uintptr_t>(ptr), bytes);
}

void on_deallocation(const void* ptr, size_t bytes) noexcept {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  s.detector.memory_deallocation(reinterpret_cast<uintptr_t>(ptr), bytes);
}

void configure_from_env() {
  if (!g_set_by_program.load()) apply_env();
}

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

void enable(Mode mode) {
  impl::g_set_by_program.store(true);
  impl::SanitizerState& s = impl::state();
  std::lock_guard lock(s.mutex);
  s.detector.reset();
  impl::g_mode.store(mode, std::memory_order_relaxed);
  impl::g_warnings.store(0, std::memory_order_relaxed);
  impl::g_enabled.store(true, std::memory_order_release);
}

void disable() {
  impl::g_set_by_program.store(true);
  impl::g_enabled.store(false, std::memory_order_release);
}

bool is_enabled() noexcept { return impl::enabled(); }

Mode mode() noexcept { return impl::g_mode.load(std::memory_order_relaxed); }

long warnings() noexcept { return impl::g_warnings.load(std::memory_order_relaxed); }

}  // namespace ember::cuda::sanitizer
