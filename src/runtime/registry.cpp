#include "runtime/registry.h"

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/driver_probe.h"
#include "runtime/visible_devices.h"

namespace ember::detail {
namespace {

struct EmulateRequest {
  int count;
  size_t bytes;
};

std::mutex g_init_mutex;
std::atomic<Runtime*> g_runtime{nullptr};
std::optional<EmulateRequest> g_emulate_request;  // guarded by g_init_mutex
std::atomic<DeviceResetHook> g_reset_hook{nullptr};
std::atomic<ContextLossHook> g_context_loss_hook{nullptr};
std::atomic<BackendSelectionHook> g_selection_hook{nullptr};  // Note [Sanitizer hooks]
std::atomic<BackendDecorator> g_decorator{nullptr};
std::atomic<uint64_t> g_generations[kMaxDevices];

constexpr const char* kHowToEmulate =
    "To run on emulated CUDA devices, set EMBER_EMULATED_DEVICES=N (and optionally "
    "EMBER_EMULATED_MEMORY=8GiB) or call ember::cuda::emulate(N) before the first cuda call.";

void drain_at_exit() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || rt->backend == nullptr) return;
  for (int d = 0; d < rt->device_count; ++d) {
    try {
      rt->backend->synchronize_device(d);
    } catch (...) {
      // A sticky error nobody collected: the process is exiting, drop it.
    }
  }
}

std::unique_ptr<Runtime> select_backend() {
  if (BackendSelectionHook hook = g_selection_hook.load()) hook();
  auto rt = std::make_unique<Runtime>();
  std::optional<EmulateRequest> emulate = g_emulate_request;
  if (!emulate) {
    if (auto count = env_value("EMBER_EMULATED_DEVICES"); count && !count->empty()) {
      size_t bytes = size_t{8} << 30;
      if (auto memory = env_value("EMBER_EMULATED_MEMORY"); memory && !memory->empty()) {
        bytes = parse_memory_size(*memory, "EMBER_EMULATED_MEMORY");
      }
      emulate = EmulateRequest{parse_device_count(*count, "EMBER_EMULATED_DEVICES"), bytes};
    }
  }
  if (emulate) {
    auto env = env_value("CUDA_VISIBLE_DEVICES");
    std::vector<int> visible = apply_visible_devices(
        parse_visible_devices(env ? std::optional<std::string_view>(*env) : std::nullopt), emulate->count);
    rt->backend = make_emulated_backend(emulate->bytes, visible);
    if (visible.empty()) {
      rt->unavailable_reason = cat("No CUDA device is available: CUDA_VISIBLE_DEVICES='", env.value_or(""),
                                   "' hides all ", emulate->count, " emulated devices.");
    }
  } else {
    std::string why_not;
    rt->backend = make_driver_backend(why_not);
    if (rt->backend == nullptr) {
      rt->unavailable_reason = cat("No CUDA device is available: ", why_not, ". ", kHowToEmulate);
    } else if (rt->backend->device_count() == 0) {
      rt->unavailable_reason = cat("No CUDA device is available: the driver reports no visible GPU. ", kHowToEmulate);
    }
  }
  if (rt->backend) {
    rt->device_count = rt->backend->device_count();
    for (int d = 0; d < rt->device_count; ++d) {
      rt->default_streams.push_back(std::make_shared<StreamState>(d, 0, 0, rt->backend->default_stream(d),
                                                                  /*owned=*/false, 0));
    }
  }
  return rt;
}

}  // namespace

Runtime& runtime() {
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) [[likely]]
    return *rt;
  std::lock_guard lock(g_init_mutex);
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) return *rt;
  Runtime* rt = select_backend().release();  // never destroyed: see Note [Backend selection]
  g_runtime.store(rt, std::memory_order_release);
  if (rt->backend) std::atexit(drain_at_exit);
  return *rt;
}

Backend& backend() {
  Runtime& rt = runtime();
  EMBER_CHECK(rt.backend != nullptr && rt.device_count > 0, CudaError, rt.unavailable_reason);
  if (BackendDecorator decorate = g_decorator.load(std::memory_order_acquire)) [[unlikely]]
    return decorate(*rt.backend);
  return *rt.backend;
}

void Backend::launch_host_task(BackendStream* /*stream*/, HostTask&& /*task*/) {
  fail<DeviceError>("the ", name(), " cuda backend cannot run host code on device memory");
}

void Backend::begin_capture(BackendStream* /*stream*/, CaptureMode /*mode*/) {
  fail<CudaError>("CUDA error: operation not supported (the ", name(), " cuda backend cannot capture graphs)");
}
BackendGraph* Backend::end_capture(BackendStream* /*stream*/) {
  fail<CudaError>("CUDA error: operation not supported (the ", name(), " cuda backend cannot capture graphs)");
}
void Backend::launch_graph(BackendGraph* /*graph*/, BackendStream* /*stream*/) {
  fail<CudaError>("CUDA error: operation not supported (the ", name(), " cuda backend cannot launch graphs)");
}
void Backend::destroy_graph(BackendGraph* graph) noexcept { delete graph; }

Backend& undecorated_backend() {
  Runtime& rt = runtime();
  EMBER_CHECK(rt.backend != nullptr && rt.device_count > 0, CudaError, rt.unavailable_reason);
  return *rt.backend;
}

Backend* backend_or_null() noexcept {
  try {
    Runtime& rt = runtime();
    if (rt.device_count == 0) return nullptr;
    BackendDecorator decorate = g_decorator.load(std::memory_order_acquire);
    if (decorate) [[unlikely]]
      return &decorate(*rt.backend);
    return rt.backend.get();
  } catch (...) {
    return nullptr;
  }
}

void set_device_reset_hook(DeviceResetHook hook) noexcept { g_reset_hook.store(hook); }
void set_backend_selection_hook(BackendSelectionHook hook) noexcept { g_selection_hook.store(hook); }
void set_backend_decorator(BackendDecorator decorator) noexcept {
  g_decorator.store(decorator, std::memory_order_release);
}
DeviceResetHook device_reset_hook() noexcept { return g_reset_hook.load(); }

void set_context_loss_hook(ContextLossHook hook) noexcept { g_context_loss_hook.store(hook); }
ContextLossHook context_loss_hook() noexcept { return g_context_loss_hook.load(); }

std::atomic<uint64_t>& generation_counter(int device) {
  EMBER_ASSERT(device >= 0 && device < kMaxDevices);
  return g_generations[device];
}

std::atomic<int>& open_capture_counter(int device) {
  static std::atomic<int> open_captures[kMaxDevices];
  EMBER_ASSERT(device >= 0 && device < kMaxDevices);
  return open_captures[device];
}

uint64_t device_generation(int device) { return generation_counter(device).load(std::memory_order_acquire); }

}  // namespace ember::detail

namespace ember::cuda {

bool is_available() {
  // As torch.cuda.is_available(), this never raises: a bad EMBER_EMULATED_* value makes it
  // false with a warning (once per distinct problem); the first call that needs a device
  // raises the error itself, since no backend was selected.
  try {
    detail::Runtime& rt = detail::runtime();
    return rt.backend != nullptr && rt.device_count > 0;
  } catch (const Error& e) {
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(mutex);
    if (warned.insert(e.what()).second) {
      std::cerr << "ember: warning: cuda::is_available() is false: " << e.what() << std::endl;
    }
    return false;
  }
}

int device_count() { return detail::runtime().device_count; }

std::string backend_name() {
  detail::Runtime& rt = detail::runtime();
  return rt.backend ? rt.backend->name() : "none";
}

bool driver_is_available() {
  // Probed with a throw-away driver backend, so that no backend gets selected and
  // emulate() stays possible.
  static const bool available = [] {
    std::unique_ptr<detail::Backend> driver = detail::make_driver_backend();
    return driver != nullptr && driver->device_count() > 0;
  }();
  return available;
}

void emulate(int count, size_t bytes_per_device) {
  EMBER_CHECK(count >= 1 && count <= detail::kMaxDevices, ValueError,
              "emulate: the number of emulated devices must be between 1 and ", detail::kMaxDevices, ", but got ",
              count);
  EMBER_CHECK(bytes_per_device > 0, ValueError, "emulate: the memory per device must be positive, but got ",
              bytes_per_device, " bytes");
  std::lock_guard lock(detail::g_init_mutex);
  if (detail::Runtime* rt = detail::g_runtime.load(std::memory_order_acquire)) {
    // Asking again for what is already running is harmless (a test's SetUp, say).
    bool same = rt->backend && std::string(rt->backend->name()) == "emulated" && detail::g_emulate_request &&
                detail::g_emulate_request->count == count && detail::g_emulate_request->bytes == bytes_per_device;
    EMBER_CHECK(same, CudaError, "emulate(", count, ", ", bytes_per_device,
                ") must be called before the first cuda call; the cuda backend is already initialized as '",
                rt->backend ? rt->backend->name() : "none", "' with ", rt->device_count, " device(s)");
    return;
  }
  detail::g_emulate_request = detail::EmulateRequest{count, bytes_per_device};
}

}  // namespace ember::cuda
