#include "backends/emulated/emulated_backend.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "backends/cpu/fftw_plan.h"
#include "ember/errors.h"
#include "kernels/host_task.h"
#include "memory/blas_workspace.h"
#include "runtime/env.h"
#include "runtime/visible_devices.h"

namespace ember::detail {

std::unique_ptr<Backend> make_emulated_backend(size_t bytes_per_device, const std::vector<int>& visible) {
  return std::make_unique<emulated::EmulatedBackend>(bytes_per_device, visible);
}

namespace emulated {
namespace {

// Note [cuBLAS workspaces] (memory/blas_workspace.h): the driver runs a Matmul of a
// floating or complex dtype through cuBLAS unless it is empty (no output, or k = 0: a fill),
// and cuBLAS's (handle, stream) pair then holds a workspace. The same GEMMs take the same
// workspace here, so memory figures match a GPU's.
void take_blas_workspace(int device, BackendStream* stream, const KernelCall& call) {
  const TensorArg& out = call.outputs[0];
  if (is_integral(out.dtype, /*include_bool=*/true) || out.numel() == 0 || call.inputs[0].sizes.back() == 0) return;
  (void)blas_workspace(device, nullptr, stream);
}

}  // namespace

EmulatedBackend::EmulatedBackend(size_t bytes_per_device, const std::vector<int>& visible)
    : launch_blocking_(env_flag("CUDA_LAUNCH_BLOCKING")) {
  for (size_t i = 0; i < visible.size(); ++i) {
    auto dev = std::make_unique<Device>(visible[i], bytes_per_device);
    dev->default_stream = std::make_unique<EmulatedStream>(static_cast<int>(i), 0, dev->error, launch_blocking_);
    dev->streams.push_back(dev->default_stream.get());
    devices_.push_back(std::move(dev));
  }
}

EmulatedBackend::~EmulatedBackend() {
  for (int d = 0; d < device_count(); ++d) drain_device(d);
}

EmulatedBackend::Device& EmulatedBackend::device(int index) const {
  EMBER_CHECK(index >= 0 && index < device_count(), CudaError, "CUDA error: invalid device ordinal (device ", index,
              " of ", device_count(), ")");
  return *devices_[static_cast<size_t>(index)];
}

EmulatedStream& EmulatedBackend::cast(BackendStream* stream) {
  EMBER_ASSERT(stream != nullptr);
  return static_cast<EmulatedStream&>(*stream);
}

EmulatedEvent& EmulatedBackend::cast(BackendEvent* event) {
  EMBER_ASSERT(event != nullptr);
  return static_cast<EmulatedEvent&>(*event);
}

cuda::DeviceProperties EmulatedBackend::properties(int index) const {
  Device& dev = device(index);
  cuda::DeviceProperties props;
  props.name = cat("ember emulated GPU ", dev.physical);
  props.total_memory = dev.memory.capacity();
  // Reported as an Ampere-class part so that TF32 is available, as on the spec's GPUs.
  props.major = 8;
  props.minor = 0;
  props.multi_processor_count = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  props.uuid = emulated_device_uuid(dev.physical);
  return props;
}

// ---- memory -------------------------------------------------------------------------

void* EmulatedBackend::raw_alloc(int index, size_t bytes) {
  Device& dev = device(index);
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(index, "cudaMalloc");
  return dev.memory.allocate(bytes);
}

void EmulatedBackend::raw_free(int index, void* ptr) {
  if (ptr == nullptr) return;
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(index, "cudaFree", true);
  synchronize_device(index);  // cudaFree waits for the device
  EMBER_CHECK(device(index).memory.release(ptr), CudaError, "CUDA error: invalid argument (raw_free of ", ptr,
              ", which is not memory of cuda:", index, ")");
}

std::pair<size_t, size_t> EmulatedBackend::mem_get_info(int index) { return device(index).memory.info(); }

std::string EmulatedBackend::alloc_failure_reason(int index) {
  Device& dev = device(index);
  size_t bytes = dev.memory.host_failure();
  if (bytes == 0) return {};
  auto [free, total] = dev.memory.info();
  return cat("the host memory that backs this emulated device is exhausted (the host could not provide ", bytes,
             " bytes; the device itself has ", free, " of its ", total, " bytes free)");
}

bool EmulatedBackend::supports_virtual_memory(int index) {
  device(index);  // validates the index
  return true;
}

void* EmulatedBackend::reserve_address_range(int index, size_t bytes) { return device(index).memory.reserve(bytes); }

bool EmulatedBackend::map_memory(int index, void* ptr, size_t bytes) {
  Device& dev = device(index);
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(index, "cuMemCreate");
  if (!dev.memory.map(ptr, bytes)) return false;
  // The owner and every device with peer access to it (cuMemSetAccess).
  std::lock_guard lock(peer_mutex_);
  for (auto [from, to] : peer_access_)
    if (to == index) dev.memory.grant_access(ptr, from);
  return true;
}

// Note [Emulated peer access]
// As on CUDA, a copy between two devices enables peer access between them (the driver
// does at the first such copy, cudaDeviceEnablePeerAccess), and that access does not
// cover memory mapped with cuMemMap (expandable segments): each range needs its own
// grant (cuMemSetAccess), given when peer access is enabled for the ranges mapped then,
// and by map_memory for later ones. Touching a range without a grant is an illegal
// address; here the copy raises it at once instead of as a sticky error.
void EmulatedBackend::check_peer_copy(int index, const void* dst, const void* src, size_t bytes) {
  for (int other = 0; other < device_count(); ++other) {
    if (other == index) continue;
    DeviceMemory& memory = device(other).memory;
    if (!memory.owns(dst) && !memory.owns(src)) continue;
    {
      std::lock_guard lock(peer_mutex_);
      if (peer_access_.insert({index, other}).second) {
        peer_access_.insert({other, index});
        memory.grant_access(nullptr, index);
        device(index).memory.grant_access(nullptr, other);
      }
    }
    if (!memory.any_mapped()) continue;
    for (const void* ptr : {dst, src})
      EMBER_CHECK(memory.accessible_from(ptr, bytes, index), CudaError,
                  "CUDA error: an illegal memory access was encountered (a copy on cuda:", index, " touched ", ptr,
                  ", memory of cuda:", other, " mapped without an access grant to cuda:", index, ")");
  }
}

void EmulatedBackend::unmap_memory(int index, void* ptr, size_t bytes) {
  synchronize_device(index);  // cuMemUnmap of memory in use waits for it, as cudaFree does
  EMBER_CHECK(device(index).memory.unmap(ptr, bytes), CudaError, "CUDA error: invalid argument (unmap of ", bytes,
              " bytes at ", ptr, ", which is not a mapped range of cuda:", index, ")");
}

void EmulatedBackend::release_address_range(int index, void* ptr, size_t bytes) {
  EMBER_CHECK(device(index).memory.release_reservation(ptr, bytes), CudaError,
              "CUDA error: invalid argument (release of the address range ", ptr,
              ", which is not an unmapped "
              "reservation of cuda:",
              index, ")");
}

bool EmulatedBackend::host_register(void* ptr, size_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(-1, "cudaHostRegister");
  EMBER_CHECK(pinned_.register_range(ptr, bytes), CudaError,
              "CUDA error: part or all of the requested memory range is already mapped (cudaHostRegister of ", bytes,
              " bytes at ", ptr, ")");
  return true;
}

void EmulatedBackend::host_unregister(void* ptr) {
  EMBER_CHECK(pinned_.unregister_range(ptr), CudaError,
              "CUDA error: pointer does not correspond to a registered memory region (cudaHostUnregister of ", ptr,
              ")");
}

void* EmulatedBackend::pinned_alloc(size_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(-1, "cudaHostAlloc");
  return pinned_.allocate(bytes);
}

void EmulatedBackend::pinned_free(void* ptr) {
  if (ptr == nullptr) return;
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(-1, "cudaFreeHost");
  EMBER_CHECK(pinned_.release(ptr), CudaError, "CUDA error: invalid argument (pinned_free of ", ptr,
              ", which is not pinned memory)");
}

// ---- streams ----------------------------------------------------------------------------

BackendStream* EmulatedBackend::default_stream(int index) { return device(index).default_stream.get(); }

BackendStream* EmulatedBackend::create_stream(int index, int priority) {
  Device& dev = device(index);
  auto [least, greatest] = priority_range();
  auto stream =
      std::make_unique<EmulatedStream>(index, std::clamp(priority, greatest, least), dev.error, launch_blocking_);
  std::lock_guard lock(streams_mutex_);
  dev.streams.push_back(stream.get());
  return stream.release();
}

void EmulatedBackend::destroy_stream(BackendStream* native) noexcept {
  auto* stream = static_cast<EmulatedStream*>(native);
  if (stream == nullptr) return;
  {
    std::lock_guard lock(streams_mutex_);
    auto& list = devices_[static_cast<size_t>(stream->device())]->streams;
    list.erase(std::remove(list.begin(), list.end(), stream), list.end());
  }
  stream->release();  // returns at once; the worker runs what is queued, then deletes the stream
}

bool EmulatedBackend::query(BackendStream* native) {
  EmulatedStream& stream = cast(native);
  if (stream.capture() != nullptr) [[unlikely]]
    captures_.refuse(stream, "cudaStreamQuery on a capturing stream");
  device(stream.device()).error.raise_if_set();
  return stream.idle();
}

void EmulatedBackend::synchronize(BackendStream* native) {
  EmulatedStream& stream = cast(native);
  if (stream.capture() != nullptr) [[unlikely]]
    captures_.refuse(stream, "cudaStreamSynchronize on a capturing stream");
  stream.drain();
  device(stream.device()).error.raise_if_set();
}

void EmulatedBackend::drain_device(int index) {
  Device& dev = device(index);
  std::vector<std::pair<std::shared_ptr<Timeline>, uint64_t>> targets;
  {
    std::lock_guard lock(streams_mutex_);
    for (EmulatedStream* s : dev.streams) targets.emplace_back(s->timeline(), s->submitted());
  }
  for (auto& [timeline, seq] : targets) timeline->wait_for(seq);
}

void EmulatedBackend::synchronize_device(int index) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(index, "cudaDeviceSynchronize", true);
  drain_device(index);
  device(index).error.raise_if_set();
}

// ---- events ------------------------------------------------------------------------------

BackendEvent* EmulatedBackend::create_event(int index, bool enable_timing) {
  device(index);
  return new EmulatedEvent(index, enable_timing);
}

void EmulatedBackend::destroy_event(BackendEvent* event) noexcept { delete static_cast<EmulatedEvent*>(event); }

void EmulatedBackend::record(BackendEvent* native_event, BackendStream* native_stream) {
  EmulatedEvent& event = cast(native_event);
  EmulatedStream& stream = cast(native_stream);
  EMBER_CHECK(event.device() == stream.device(), ValueError, "Event device ", event.device(),
              " does not match recording stream's device ", stream.device(), ".");
  if (stream.capture() != nullptr && captures_.record(event, stream)) [[unlikely]]
    return;
  auto mark = std::make_shared<RecordMark>();
  mark->timeline = stream.timeline();
  mark->device = stream.device();
  // The sequence number is known only once queued; the worker never reads it, and the
  // mark is published (set_mark) only after it is written.
  RecordMark* raw = mark.get();
  uint64_t seq = stream.enqueue(RecordWork{mark});
  raw->seq = seq;
  event.set_mark(std::move(mark));
  if (launch_blocking_) synchronize(native_stream);
}

void EmulatedBackend::wait(BackendStream* native_stream, BackendEvent* native_event) {
  EmulatedStream& stream = cast(native_stream);
  if (captures_.any() && captures_.wait(stream, cast(native_event))) [[unlikely]]
    return;
  std::shared_ptr<RecordMark> mark = cast(native_event).mark();
  // Nothing to wait for: never recorded, already reached, or earlier on this same FIFO.
  if (mark == nullptr || mark->done() || mark->timeline == stream.timeline()) return;
  submit(stream, WaitWork{std::move(mark)});
}

bool EmulatedBackend::query(BackendEvent* native_event) {
  EmulatedEvent& event = cast(native_event);
  if (captures_.any()) [[unlikely]] {
    captures_.check_event(event, "cudaEventQuery on an event recorded in a capture");
    captures_.check_unsafe_call(event.device(), "cudaEventQuery");
  }
  device(event.device()).error.raise_if_set();
  std::shared_ptr<RecordMark> mark = event.mark();
  return mark == nullptr || mark->done();
}

void EmulatedBackend::synchronize(BackendEvent* native_event) {
  EmulatedEvent& event = cast(native_event);
  if (captures_.any()) [[unlikely]] {
    captures_.check_event(event, "cudaEventSynchronize on an event recorded in a capture");
    captures_.check_unsafe_call(event.device(), "cudaEventSynchronize");
  }
  if (std::shared_ptr<RecordMark> mark = event.mark()) mark->timeline->wait_for(mark->seq);
  device(event.device()).error.raise_if_set();
}

float EmulatedBackend::elapsed_ms(BackendEvent* start_event, BackendEvent* end_event) {
  EmulatedEvent& start = cast(start_event);
  EmulatedEvent& end = cast(end_event);
  EMBER_CHECK(start.timing() && end.timing(), ValueError,
              "Both events must be created with argument 'enable_timing=True'.");
  std::shared_ptr<RecordMark> a = start.mark(), b = end.mark();
  EMBER_CHECK(a && b, ValueError, "Both events must be recorded before calculating elapsed time.");
  EMBER_CHECK(start.device() == end.device(), ValueError, "elapsed_time: the events are on different devices (",
              start.device(), " and ", end.device(), ")");
  EMBER_CHECK(a->done() && b->done(), ValueError, "Both events must be completed before calculating elapsed time.");
  return std::chrono::duration<float, std::milli>(b->time - a->time).count();
}

// ---- work ------------------------------------------------------------------------------------

void EmulatedBackend::submit(EmulatedStream& stream, WorkItem item) {
  if (stream.capture() != nullptr && captures_.append(stream, std::move(item))) [[unlikely]]
    return;
  submitted(stream, stream.enqueue(std::move(item)));
}

void EmulatedBackend::submitted(EmulatedStream& stream, uint64_t seq) {
  if (launch_blocking_) {
    stream.timeline()->wait_for(seq);
    device(stream.device()).error.raise_if_set();
  }
}

void EmulatedBackend::launch(BackendStream* native, const KernelCall& call) {
  EmulatedStream& stream = cast(native);
  if (call.op == OpKind::Matmul) take_blas_workspace(stream.device(), native, call);
  if (stream.capture() != nullptr && captures_.append_kernel(stream, call)) [[unlikely]]
    return;
  submitted(stream, stream.enqueue_kernel(call));
}

void EmulatedBackend::launch_host_function(BackendStream* stream, std::function<void()> fn) {
  submit(cast(stream), FunctionWork{std::move(fn)});
}

void EmulatedBackend::launch_host_task(BackendStream* stream, HostTask&& task) {
  submit(cast(stream), FunctionWork{std::move(task.body)});
}

void EmulatedBackend::copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned,
                           BackendStream* native) {
  EmulatedStream& stream = cast(native);
  if (bytes == 0) return;
  if (kind != CopyKind::DeviceToDevice && !host_pinned && captures_.any()) [[unlikely]] {
    // A copy to or from pageable memory synchronizes the host with the stream.
    if (stream.capture() != nullptr)
      captures_.refuse(stream, "a copy between pageable host memory and a capturing stream");
    captures_.check_unsafe_call(stream.device(), "a copy between pageable host memory and a device");
  }
  if (kind == CopyKind::DeviceToDevice && devices_.size() > 1) check_peer_copy(stream.device(), dst, src, bytes);
  if (kind == CopyKind::HostToDevice && !host_pinned) {
    // cudaMemcpyAsync from pageable memory returns once the source has been consumed:
    // snapshot it, so the caller may reuse its buffer at once.
    std::unique_ptr<std::byte[]> staging(new std::byte[bytes]);
    std::memcpy(staging.get(), src, bytes);
    submit(stream, CopyWork{dst, nullptr, bytes, std::move(staging)});
    return;
  }
  if (kind == CopyKind::DeviceToHost && !host_pinned) {
    // Into pageable memory the copy is synchronous: it returns with the data in place.
    uint64_t seq = stream.enqueue(CopyWork{dst, src, bytes, nullptr});
    stream.timeline()->wait_for(seq);
    device(stream.device()).error.raise_if_set();
    return;
  }
  submit(stream, CopyWork{dst, src, bytes, nullptr});
}

void EmulatedBackend::sleep(BackendStream* stream, std::chrono::nanoseconds duration) {
  submit(cast(stream), SleepWork{duration});
}

bool EmulatedBackend::can_access_peer(int index, int peer) {
  device(index);
  device(peer);
  return index != peer;  // as cudaDeviceCanAccessPeer: every pair of distinct devices
}

void EmulatedBackend::check_error(int index) { device(index).error.raise_if_set(); }

std::shared_ptr<const fft::Plan> EmulatedBackend::create_fft_plan(const fft::PlanKey& key, int index) {
  device(index);
  // cufftMakePlan allocates and synchronizes: unsafe during a capture, as cudaMalloc.
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call(index, "cufftMakePlan");
  return cpu::create_fft_plan(key);
}

void EmulatedBackend::begin_capture(BackendStream* native, CaptureMode mode) {
  EmulatedStream& stream = cast(native);
  device(stream.device()).error.raise_if_set();
  captures_.begin(stream, mode);
}

BackendGraph* EmulatedBackend::end_capture(BackendStream* native) { return captures_.end(cast(native)); }

void EmulatedBackend::launch_graph(BackendGraph* native_graph, BackendStream* native) {
  EMBER_ASSERT(native_graph != nullptr);
  auto& graph = static_cast<EmulatedGraph&>(*native_graph);
  EmulatedStream& stream = cast(native);
  EMBER_CHECK(graph.device() == stream.device(), CudaError,
              "CUDA error: invalid resource handle (a graph captured "
              "on cuda:",
              graph.device(), " launched on a stream of cuda:", stream.device(), ")");
  submit(stream, GraphWork{graph.items()});
}

void EmulatedBackend::destroy_graph(BackendGraph* graph) noexcept { delete static_cast<EmulatedGraph*>(graph); }

std::pair<CaptureStatus, uint64_t> EmulatedBackend::capture_status(BackendStream* native) noexcept {
  return captures_.status(cast(native));
}

CaptureMode EmulatedBackend::exchange_capture_mode(CaptureMode mode) noexcept {
  return Captures::exchange_thread_mode(mode);
}

void EmulatedBackend::reset(int index) {
  drain_device(index);
  device(index).error.clear();
}

}  // namespace emulated
}  // namespace ember::detail
