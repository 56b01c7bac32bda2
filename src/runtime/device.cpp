// The current device (thread-local), device selection, DeviceGuard, device-wide calls.
#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/context.h"
#include "runtime/registry.h"

namespace ember::detail {
namespace {

// Each host thread starts on device 0, as a CUDA context does.
thread_local int t_current_device = 0;

int cuda_index(Device device) {
  EMBER_CHECK(device.is_cuda(), ValueError, "Expected a cuda device, but got: ", device.str());
  return device.index();
}

}  // namespace

void check_device_index(int device) {
  int count = backend().device_count();
  EMBER_CHECK(device >= 0 && device < count, IndexError, "Device index value ", device, " is out of index range [0, ",
              count, ")");
}

int current_device_index() {
  backend();  // a thread with no device gets the "no CUDA device" error here
  return t_current_device;
}

Device resolve_device(Device device) {
  if (device.is_cpu()) return Device(kCPU);
  int index = cuda_index(device);
  if (index < 0) return Device(kCUDA, current_device_index());
  check_device_index(index);
  return device;
}

int resolve_index(int device) {
  if (device == -1) return current_device_index();
  check_device_index(device);  // IndexError below -1 too
  return device;
}

}  // namespace ember::detail

namespace ember::cuda {

int current_device() { return detail::current_device_index(); }

void set_device(int device) {
  if (device == -1) return;  // "no device given": a no-op, as torch.cuda.set_device(-1)
  detail::check_device_index(device);
  if (detail::t_current_device == device) return;
  detail::backend().set_device(device);
  detail::t_current_device = device;
}

void set_device(Device device) { set_device(detail::cuda_index(device)); }

void synchronize(int device) { detail::backend().synchronize_device(detail::resolve_index(device)); }

void synchronize(Device device) { synchronize(detail::cuda_index(device)); }

DeviceProperties get_device_properties(int device) {
  return detail::backend().properties(detail::resolve_index(device));
}

std::string get_device_name(int device) { return get_device_properties(device).name; }

bool can_device_access_peer(int device, int peer_device) {
  detail::check_device_index(device);
  detail::check_device_index(peer_device);
  return detail::backend().can_access_peer(device, peer_device);
}

void reset_device(int device) {
  int index = detail::resolve_index(device);
  // The open capture's streams would become invalid under it, so nothing could end it.
  EMBER_CHECK(detail::open_capture_counter(index).load(std::memory_order_acquire) == 0, CudaError,
              "CUDA error: operation not permitted when stream is capturing (reset_device of cuda:", index,
              " while a graph capture is open on it: end the capture first)");
  detail::backend().reset(index);  // drains and clears the sticky error
  // The cache goes back to the device before the streams and events it still holds
  // (for deferred frees) become invalid.
  if (detail::DeviceResetHook hook = detail::device_reset_hook()) hook(index);
  detail::generation_counter(index).fetch_add(1, std::memory_order_acq_rel);
}

DeviceGuard::DeviceGuard(int device) : original_(current_device()) {
  set_device(device);  // -1: "no device given", as torch.cuda.device(-1); below: IndexError
}

DeviceGuard::DeviceGuard(Device device) : DeviceGuard(detail::cuda_index(device)) {}

DeviceGuard::~DeviceGuard() {
  try {
    set_device(original_);
  } catch (...) {
    // original_ was valid when the guard was made and devices do not disappear.
  }
}

}  // namespace ember::cuda
