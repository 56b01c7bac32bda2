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
}

BackendGraph* DriverBackend::end_capture(BackendStream* stream) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  cudaGraph_t graph = nullptr;
  // A failed end (an invalidated or unjoined capture) returns no graph as documented;
  // one it returned all the same is destroyed, not leaked.
  const cudaError_t ended = cudaStreamEndCapture(s.handle, &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    throw_cuda_error(ended);
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
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
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(g->device);
  (void)cudaGraphExecDestroy(g->exec);
  (void)cudaGraphDestroy(g->graph);
  (void)cudaGetLastError();  // a destructor reports nothing
  if (previous >= 0) (void)cudaSetDevice(previous);
  delete g;
}

std::pair<CaptureStatus, uint64_t> DriverBackend::capture_status(BackendStream* stream) noexcept {
  DriverStream& s = as_driver(stream);
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
