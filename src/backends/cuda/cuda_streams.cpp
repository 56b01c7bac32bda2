// Streams and events of the driver backend (see cuda_backend.h).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace ember::detail::driver {

BackendStream* DriverBackend::default_stream(int device) { return &default_streams_.at(device); }

BackendStream* DriverBackend::create_stream(int device, int priority) {
  DeviceScope scope(device);
  cudaStream_t handle = nullptr;
  // Non-blocking: user streams do not synchronize with the legacy default stream,
  // as torch.cuda.Stream() does not. CUDA clamps the priority into its range.
  check_cuda(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  return new DriverStream(device, handle, generation(device));
}

void DriverBackend::destroy_stream(BackendStream* stream) noexcept {
  auto* s = static_cast<DriverStream*>(stream);
  if (s == nullptr) return;
  bool own = s->handle != nullptr && s != &default_streams_[s->device];
  bool current = false;
  {
    std::lock_guard lock(mutex_);
    current = s->generation == generations_[s->device];
  }
  if (own && current) {
    DeviceScope scope(s->device, DeviceScope::NoThrow{});
    (void)cudaStreamDestroy(s->handle);  // returns at once; queued work still completes
    (void)cudaGetLastError();            // a destructor reports nothing; the error stays sticky if it was
  }
  if (own) delete s;
}

bool DriverBackend::query(BackendStream* stream) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  cudaError_t err = cudaStreamQuery(s.handle);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  check_cuda(err);
  return true;
}

void DriverBackend::synchronize(BackendStream* stream) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  check_cuda(cudaStreamSynchronize(s.handle));
}

void DriverBackend::synchronize_device(int device) {
  DeviceScope scope(device);
  check_cuda(cudaDeviceSynchronize());
}

std::pair<int, int> DriverBackend::priority_range() const {
  int least = 0, greatest = 0;
  check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return {least, greatest};
}

// ---- events ----------------------------------------------------------------------------

BackendEvent* DriverBackend::create_event(int device, bool enable_timing) {
  DeviceScope scope(device);
  cudaEvent_t handle = nullptr;
  // Timing costs a timestamp per record; PyTorch's events disable it unless asked.
  check_cuda(cudaEventCreateWithFlags(&handle, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
  return new DriverEvent(device, handle, generation(device));
}

void DriverBackend::destroy_event(BackendEvent* event) noexcept {
  auto* e = static_cast<DriverEvent*>(event);
  if (e == nullptr) return;
  bool current = false;
  {
    std::lock_guard lock(mutex_);
    current = e->generation == generations_[e->device];
  }
  if (current) {
    DeviceScope scope(e->device, DeviceScope::NoThrow{});
    (void)cudaEventDestroy(e->handle);
    (void)cudaGetLastError();
  }
  delete e;
}

void DriverBackend::record(BackendEvent* event, BackendStream* stream) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  check_cuda(cudaEventRecord(as_driver(event).handle, s.handle));
}

void DriverBackend::wait(BackendStream* stream, BackendEvent* event) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  check_cuda(cudaStreamWaitEvent(s.handle, as_driver(event).handle, 0));
}

bool DriverBackend::query(BackendEvent* event) {
  DriverEvent& e = as_driver(event);
  DeviceScope scope(e.device);
  cudaError_t err = cudaEventQuery(e.handle);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check_cuda(err);
  return true;
}

void DriverBackend::synchronize(BackendEvent* event) {
  DriverEvent& e = as_driver(event);
  DeviceScope scope(e.device);
  check_cuda(cudaEventSynchronize(e.handle));
}

float DriverBackend::elapsed_ms(BackendEvent* start, BackendEvent* end) {
  DeviceScope scope(as_driver(start).device);
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, as_driver(start).handle, as_driver(end).handle));
  return ms;
}

}  // namespace ember::detail::driver
