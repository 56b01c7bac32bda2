// SanitizingBackend: forward each hook, tell the RaceDetector what it orders or touches.
// Host tasks (Note [Host tasks]) are accesses like launches.
#include "sanitizer/sanitizing_backend.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "ember/errors.h"
#include "ember/sanitizer.h"
#include "kernels/host_task.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail::sanitizer {

namespace {

uintptr_t key(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p); }

void remember_size(const void* ptr, size_t bytes) {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  s.detector.memory_deallocation(key(ptr), bytes);  // whatever was there before is gone
  s.raw_sizes[key(ptr)] = bytes;
}

// The size raw_alloc/pinned_alloc gave `ptr`; 1 for memory allocated before enable().
size_t forget_size(const void* ptr) {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.raw_sizes.find(key(ptr));
  if (it == s.raw_sizes.end()) return 1;
  size_t bytes = it->second;
  s.raw_sizes.erase(it);
  return bytes;
}

// Tells the detector, under its lock, what a hook ordered, created or destroyed.
template <typename F>
void tell_detector(F&& f) {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  f(s.detector);
}

}  // namespace

MemoryAccess access_of(const TensorArg& arg, AccessType type, const char* argument, int index) {
  MemoryAccess access;
  access.type = type;
  access.argument = argument;
  access.index = index;
  if (arg.data == nullptr || arg.numel() == 0) return access;  // empty: touches nothing
  auto item = static_cast<int64_t>(element_size(arg.dtype));
  struct Moving {
    uint64_t stride;  // bytes, absolute
    int64_t size;
  };
  std::array<Moving, 16> moving{};
  size_t count = 0;
  bool dense = false;  // too many dimensions to look for a period
  int64_t low = 0, high = 0;
  for (size_t d = 0; d < arg.sizes.size(); ++d) {
    int64_t extent = arg.strides[d] * (arg.sizes[d] - 1);
    (extent < 0 ? low : high) += extent;
    if (arg.sizes[d] < 2 || arg.strides[d] == 0) continue;
    if (count == moving.size()) {
      dense = true;
      continue;
    }
    moving[count++] = {static_cast<uint64_t>(std::abs(arg.strides[d]) * item), arg.sizes[d]};
  }
  auto base = static_cast<int64_t>(key(arg.data));
  access.begin = static_cast<uintptr_t>(base + low * item);
  access.end = static_cast<uintptr_t>(base + (high + 1) * item);
  if (dense) return access;
  // Note [Access footprints]: the smallest stride P whose inner dimensions' bytes fit
  // in less than P, every larger stride a multiple of it.
  std::sort(moving.begin(), moving.begin() + count,
            [](const Moving& a, const Moving& b) { return a.stride < b.stride; });
  auto inner = static_cast<uint64_t>(item);
  for (size_t k = 0; k < count; ++k) {
    uint64_t period = moving[k].stride;
    if (inner < period && std::all_of(moving.begin() + k, moving.begin() + count,
                                      [&](const Moving& m) { return m.stride % period == 0; })) {
      access.footprint = Footprint{period, access.begin % period, inner};
      break;
    }
    inner += moving[k].stride * static_cast<uint64_t>(moving[k].size - 1);
  }
  return access;
}

void add_operands(std::vector<MemoryAccess>& out, const OperandList& args, AccessType type, const char* argument) {
  int count = static_cast<int>(args.size());
  for (int i = 0; i < count; ++i) out.push_back(access_of(args[i], type, argument, count > 1 ? i : -1));
}

void SanitizingBackend::access(BackendStream* stream, const std::vector<MemoryAccess>& accesses, const char* op,
                               int device) {
  // Work issued to a capturing stream does not run now but at each replay of its graph:
  // kept for the replays (Note [Sanitizing graph replays]).
  if (auto [status, id] = upstream_.capture_status(stream); status != CaptureStatus::None) [[unlikely]] {
    std::lock_guard lock(graphs_mutex_);
    CapturedAccesses& captured = captures_[id];
    if (captured.device < 0) captured.device = device;
    captured.accesses.insert(captured.accesses.end(), accesses.begin(), accesses.end());
    return;
  }
  // Frame 0 is the caller of launch()/copy(): the op or runtime code that issued it.
  auto stack = std::make_shared<const StackTrace>(StackTrace::capture(2));
  std::string report;
  {
    SanitizerState& s = state();
    std::lock_guard lock(s.mutex);
    std::vector<DataRace> races = s.detector.check(key(stream), accesses, op, stack);
    if (!races.empty()) {
      report = format_races(races, upstream_);
      if (cuda::sanitizer::mode() == cuda::sanitizer::Mode::Error) throw DataRaceError(report);
    }
    s.detector.record(key(stream), accesses, op, stack, device);
  }
  if (!report.empty()) {
    std::fprintf(stderr, "============================\n%s", report.c_str());
    note_warning();
  }
}

void SanitizingBackend::launch(BackendStream* stream, const KernelCall& call) {
  std::vector<MemoryAccess> accesses;
  accesses.reserve(call.outputs.size() + call.inputs.size());
  add_operands(accesses, call.outputs, AccessType::Write, "output");
  add_operands(accesses, call.inputs, AccessType::Read, "input");
  access(stream, accesses, op_name(call.op), call.device);
  upstream_.launch(stream, call);
}

void SanitizingBackend::launch_host_task(BackendStream* stream, HostTask&& task) {
  std::vector<MemoryAccess> accesses;
  accesses.reserve(task.outputs.size() + task.inputs.size());
  add_operands(accesses, task.outputs, AccessType::Write, "output");
  add_operands(accesses, task.inputs, AccessType::Read, "input");
  access(stream, accesses, task.name, task.device);
  upstream_.launch_host_task(stream, std::move(task));
}

void SanitizingBackend::copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned,
                             BackendStream* stream) {
  // Pageable host memory is done with when the call returns (the copy stages it), so only
  // device and pinned memory are accessed by the stream.
  std::vector<MemoryAccess> accesses;
  if (bytes > 0) {
    if (kind != CopyKind::DeviceToHost || host_pinned)
      accesses.push_back({key(dst), key(dst) + bytes, AccessType::Write, "destination", -1});
    if (kind != CopyKind::HostToDevice || host_pinned)
      accesses.push_back({key(src), key(src) + bytes, AccessType::Read, "source", -1});
  }
  const char* op = kind == CopyKind::HostToDevice   ? "copy_ (host to device)"
                   : kind == CopyKind::DeviceToHost ? "copy_ (device to host)"
                                                    : "copy_ (device to device)";
  access(stream, accesses, op, -1);
  upstream_.copy(dst, src, bytes, kind, host_pinned, stream);
}

// ---- memory ---------------------------------------------------------------------

// Memory straight from the system starts with no history; its size is kept so that
// its release can end the history of every byte.
void* SanitizingBackend::raw_alloc(int device, size_t bytes) {
  void* ptr = upstream_.raw_alloc(device, bytes);
  if (ptr != nullptr) remember_size(ptr, bytes);
  return ptr;
}

void SanitizingBackend::raw_free(int device, void* ptr) {
  upstream_.raw_free(device, ptr);
  on_release(ptr, forget_size(ptr), device);  // cudaFree synchronizes the device
}

// Unmapped memory keeps no history; as raw_free, the unmap synchronizes the device.
void SanitizingBackend::unmap_memory(int device, void* ptr, size_t bytes) {
  upstream_.unmap_memory(device, ptr, bytes);
  on_release(ptr, bytes, device);
}

void* SanitizingBackend::pinned_alloc(size_t bytes) {
  void* ptr = upstream_.pinned_alloc(bytes);
  if (ptr != nullptr) remember_size(ptr, bytes);
  return ptr;
}

void SanitizingBackend::pinned_free(void* ptr) {
  upstream_.pinned_free(ptr);
  on_release(ptr, forget_size(ptr), -1);
}

// ---- streams ----------------------------------------------------------------------

BackendStream* SanitizingBackend::default_stream(int device) {
  BackendStream* stream = upstream_.default_stream(device);
  tell_detector([&](RaceDetector& d) { d.stream_created(key(stream), device, /*is_default=*/true); });
  return stream;
}

BackendStream* SanitizingBackend::create_stream(int device, int priority) {
  BackendStream* stream = upstream_.create_stream(device, priority);
  tell_detector([&](RaceDetector& d) { d.stream_created(key(stream), device); });
  return stream;
}

void SanitizingBackend::destroy_stream(BackendStream* stream) noexcept {
  tell_detector([&](RaceDetector& d) { d.stream_destroyed(key(stream)); });
  upstream_.destroy_stream(stream);
}

bool SanitizingBackend::query(BackendStream* stream) {
  bool done = upstream_.query(stream);
  if (done) {  // the host has seen the stream's work complete
    tell_detector([&](RaceDetector& d) { d.stream_synchronize(key(stream)); });
  }
  return done;
}

void SanitizingBackend::synchronize(BackendStream* stream) {
  upstream_.synchronize(stream);
  tell_detector([&](RaceDetector& d) { d.stream_synchronize(key(stream)); });
}

void SanitizingBackend::synchronize_device(int device) {
  upstream_.synchronize_device(device);
  tell_detector([&](RaceDetector& d) { d.device_synchronize(device); });
}

void SanitizingBackend::reset(int device) {
  upstream_.reset(device);  // drains the device
  tell_detector([&](RaceDetector& d) { d.device_synchronize(device); });
}

// ---- events -----------------------------------------------------------------------

BackendEvent* SanitizingBackend::create_event(int device, bool enable_timing) {
  BackendEvent* event = upstream_.create_event(device, enable_timing);
  tell_detector([&](RaceDetector& d) { d.event_created(key(event)); });
  return event;
}

void SanitizingBackend::destroy_event(BackendEvent* event) noexcept {
  tell_detector([&](RaceDetector& d) { d.event_destroyed(key(event)); });
  upstream_.destroy_event(event);
}

void SanitizingBackend::record(BackendEvent* event, BackendStream* stream) {
  upstream_.record(event, stream);
  tell_detector([&](RaceDetector& d) { d.event_record(key(event), key(stream)); });
}

void SanitizingBackend::wait(BackendStream* stream, BackendEvent* event) {
  upstream_.wait(stream, event);
  tell_detector([&](RaceDetector& d) { d.event_wait(key(stream), key(event)); });
}

bool SanitizingBackend::query(BackendEvent* event) {
  bool done = upstream_.query(event);
  if (done) {
    tell_detector([&](RaceDetector& d) { d.event_synchronize(key(event)); });
  }
  return done;
}

void SanitizingBackend::synchronize(BackendEvent* event) {
  upstream_.synchronize(event);
  tell_detector([&](RaceDetector& d) { d.event_synchronize(key(event)); });
}

// ---- graphs ------------------------------------------------------------------------

// Note [Sanitizing graph replays]
// A capture runs nothing, so access() keeps what each captured launch, copy and host
// task would touch, by capture id (a stream forked into the capture shares its id).
// end_capture hands the list to the graph; launch_graph checks and records it as one
// access "CUDA graph replay" on the replay stream, before the replay is queued: a
// replay races with unordered work of other streams (and host reads of its output
// before a synchronization) as its ops issued eagerly there would. Within one replay
// nothing is checked: the capture's own order (its streams' waits on each other) is
// CUDA's to keep. Not covered: graphs captured while the sanitizer was off (their
// replays are unchecked), and events recorded and waited on inside a capture, which
// still reach the detector as if issued eagerly.
BackendGraph* SanitizingBackend::end_capture(BackendStream* stream) {
  const uint64_t id = upstream_.capture_status(stream).second;
  BackendGraph* graph = nullptr;
  try {
    graph = upstream_.end_capture(stream);
  } catch (...) {
    if (upstream_.capture_status(stream).first == CaptureStatus::None) {  // ended all the same
      std::lock_guard lock(graphs_mutex_);
      captures_.erase(id);
    }
    throw;
  }
  std::lock_guard lock(graphs_mutex_);
  auto it = captures_.find(id);
  if (it != captures_.end()) {
    graphs_[graph] = std::move(it->second);
    captures_.erase(it);
  }
  return graph;
}

void SanitizingBackend::launch_graph(BackendGraph* graph, BackendStream* stream) {
  CapturedAccesses captured;
  {
    std::lock_guard lock(graphs_mutex_);
    auto it = graphs_.find(graph);
    if (it != graphs_.end()) captured = it->second;
  }
  if (!captured.accesses.empty()) access(stream, captured.accesses, "CUDA graph replay", captured.device);
  upstream_.launch_graph(graph, stream);
}

void SanitizingBackend::destroy_graph(BackendGraph* graph) noexcept {
  {
    std::lock_guard lock(graphs_mutex_);
    graphs_.erase(graph);
  }
  upstream_.destroy_graph(graph);
}

}  // namespace ember::detail::sanitizer
