// SanitizingBackend: forward each hook, tell the RaceDetector what it orders or touches.
#include "sanitizer/sanitizing_backend.h"

#include <algorithm>
#include <cstdio>

#include "ember/errors.h"
#include "ember/sanitizer.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail::sanitizer {

namespace {

uintptr_t key(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p); }

// The bytes a strided operand can touch: from its lowest to its highest element.
MemoryAccess access_of(const TensorArg& arg, AccessType type, const char* argument, int index) {
  MemoryAccess access;
  access.type = type;
  access.argument = argument;
  access.index = index;
  if (arg.data == nullptr || arg.numel() == 0) return access;  // empty: touches nothing
  int64_t low = 0, high = 0;
  for (size_t d = 0; d < arg.sizes.size(); ++d) {
    int64_t extent = arg.strides[d] * (arg.sizes[d] - 1);
    (extent < 0 ? low : high) += extent;
  }
  auto item = static_cast<int64_t>(element_size(arg.dtype));
  auto base = static_cast<int64_t>(key(arg.data));
  access.begin = static_cast<uintptr_t>(base + low * item);
  access.end = static_cast<uintptr_t>(base + (high + 1) * item);
  return access;
}

void add_operands(std::vector<MemoryAccess>& out, const std::vector<TensorArg>& args, AccessType type,
                  const char* argument) {
  int count = static_cast<int>(args.size());
  for (int i = 0; i < count; ++i) out.push_back(access_of(args[i], type, argument, count > 1 ? i : -1));
}

// Tells the detector, under its lock, what a hook ordered, created or destroyed.
template <typename F>
void tell_detector(F&& f) {
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  f(s.detector);
}

}  // namespace

void SanitizingBackend::access(BackendStream* stream, const std::vector<MemoryAccess>& accesses, const char* op,
                               int device) {
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

void* SanitizingBackend::raw_alloc(int device, size_t bytes) {
  void* ptr = upstream_.raw_alloc(device, bytes);
  if (ptr != nullptr) on_allocation(ptr, bytes);
  return ptr;
}

void SanitizingBackend::raw_free(int device, void* ptr) {
  upstream_.raw_free(device, ptr);
  SanitizerState& s = state();
  std::lock_guard lock(s.mutex);
  s.detector.device_synchronize(device);  // cudaFree synchronizes the device
  s.detector.memory_deallocation(key(ptr), 1);
}

void* SanitizingBackend::pinned_alloc(size_t bytes) {
  void* ptr = upstream_.pinned_alloc(bytes);
  if (ptr != nullptr) on_allocation(ptr, bytes);
  return ptr;
}

void SanitizingBackend::pinned_free(void* ptr) {
  upstream_.pinned_free(ptr);
  on_deallocation(ptr, 1);
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

}  // namespace ember::detail::sanitizer
