// Graph capture of the driver backend: CUDA's stream capture and graph launch.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace ember::detail::driver {
namespace {

struct DriverGraph final : BackendGraph {
  DriverGraph(int device, cudaGraph_t graph, cudaGraphExec_t exec) : device(device), graph(graph), exec(exec) {}
  int device;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
};

cudaStreamCaptureMode to_cuda(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::Global: return cudaStreamCaptureModeGlobal;
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

}  // namespace

void DriverBackend::begin_capture(BackendStream* stream, CaptureMode mode) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  check_cuda(cudaStreamBeginCapture(s.handle, to_cuda(mode)));
  open_captures_.fetch_add(1, std::memory_order_acq_rel);
}

BackendGraph* DriverBackend::end_capture(BackendStream* stream) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  cudaGraph_t graph = nullptr;
  // A failed end (an invalidated or unjoined capture) returns no graph as documented;
  // one it returned all the same is destroyed, not leaked.
  const bool was_capturing = capture_status(stream).first != CaptureStatus::None;
  const cudaError_t ended = cudaStreamEndCapture(s.handle, &graph);
  // Most failures end the capture too (an invalidated one); a wrong-thread end does not.
  if (was_capturing && capture_status(stream).first == CaptureStatus::None)
    open_captures_.fetch_sub(1, std::memory_order_acq_rel);
  if (ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    throw_cuda_error(ended);
  }
  cudaGraphExec_t exec = nullptr;
  // AutoFreeOnLaunch, as PyTorch: a graph with allocation nodes (backend:cudaMallocAsync,
  // Note [Async allocator during capture]) may then be replayed while the outputs of its
  // last replay are still held; without it the second replay fails.
  cudaError_t err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  if (err != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    throw_cuda_error(err);
  }
  return new DriverGraph(s.device, graph, exec);
}

void DriverBackend::launch_graph(BackendGraph* graph, BackendStream* stream) {
  auto& g = static_cast<DriverGraph&>(*graph);
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  check_cuda(cudaGraphLaunch(g.exec, s.handle));
}

void DriverBackend::destroy_graph(BackendGraph* graph) noexcept {
  auto* g = static_cast<DriverGraph*>(graph);
  if (g == nullptr) return;
  {
    DeviceScope scope(g->device, DeviceScope::NoThrow{});
    (void)cudaGraphExecDestroy(g->exec);
    (void)cudaGraphDestroy(g->graph);
    (void)cudaGetLastError();  // a destructor reports nothing
  }
  delete g;
}

CaptureMode DriverBackend::exchange_capture_mode(CaptureMode mode) noexcept {
  cudaStreamCaptureMode native = to_cuda(mode);
  if (cudaThreadExchangeStreamCaptureMode(&native) != cudaSuccess) {
    (void)cudaGetLastError();
    return mode;  // nothing changed: restoring `mode` later leaves the thread as it is
  }
  switch (native) {
    case cudaStreamCaptureModeThreadLocal: return CaptureMode::ThreadLocal;
    case cudaStreamCaptureModeRelaxed: return CaptureMode::Relaxed;
    default: return CaptureMode::Global;
  }
}

std::pair<CaptureStatus, uint64_t> DriverBackend::capture_status(BackendStream* stream) noexcept {
  DriverStream& s = as_driver(stream);
  // Handle 0 names the legacy stream of the current device: ask under the stream's own.
  DeviceScope scope(s.device, DeviceScope::NoThrow{});
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(s.handle, &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return {CaptureStatus::None, 0};
  }
  switch (status) {
    case cudaStreamCaptureStatusActive: return {CaptureStatus::Active, id};
    case cudaStreamCaptureStatusInvalidated: return {CaptureStatus::Invalidated, id};
    default: return {CaptureStatus::None, 0};
  }
}

}  // namespace ember::detail::driver
