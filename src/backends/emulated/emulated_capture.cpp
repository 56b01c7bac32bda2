// Stream capture on emulated devices: see Note [Emulated stream capture].
#include "backends/emulated/emulated_capture.h"

#include <algorithm>

#include "backends/emulated/emulated_backend.h"
#include "ember/errors.h"

namespace ember::detail::emulated {
namespace {

// cudaGetErrorString's wording of the capture errors.
constexpr const char* kUnsupported = "CUDA error: operation not permitted when stream is capturing";
constexpr const char* kInvalidated = "CUDA error: operation failed due to a previous error during capture";
constexpr const char* kMerge = "CUDA error: operation would result in a merge of separate capture sequences";
constexpr const char* kUnmatched = "CUDA error: capture was not ended in the same stream as it began";
constexpr const char* kUnjoined = "CUDA error: capturing stream has unjoined work";
constexpr const char* kIsolation = "CUDA error: dependency created on uncaptured work in another stream";
// The calling thread's capture mode (cudaThreadExchangeStreamCaptureMode), shared by
// every emulated backend of the process as CUDA's is by every context.
thread_local CaptureMode thread_mode = CaptureMode::Global;

constexpr const char* kWrongThread =
    "CUDA error: attempt to terminate a thread-local capture sequence from another thread";

}  // namespace

EmulatedCapture::Member* EmulatedCapture::member(const EmulatedStream* stream) noexcept {
  for (Member& m : members)
    if (m.stream == stream) return &m;
  return nullptr;
}

void Captures::begin(EmulatedStream& stream, CaptureMode mode) {
  std::lock_guard lock(mutex_);
  EMBER_CHECK(stream.capture() == nullptr, CudaError,
              "CUDA error: operation not permitted when stream is capturing (cudaStreamBeginCapture on a stream "
              "that is already capturing)");
  auto capture = std::make_shared<EmulatedCapture>();
  capture->id = next_id_++;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->device = stream.device();
  capture->members.push_back({&stream});
  open_captures_.push_back(capture);
  stream.set_capture(capture.get());
  open_.fetch_add(1, std::memory_order_release);
}

void Captures::detach_members(EmulatedCapture& capture) noexcept {
  for (const EmulatedCapture::Member& m : capture.members) m.stream->set_capture(nullptr);
  capture.open = false;
  auto it = std::find_if(open_captures_.begin(), open_captures_.end(),
                         [&](const auto& open) { return open.get() == &capture; });
  if (it != open_captures_.end()) {
    open_captures_.erase(it);
    open_.fetch_sub(1, std::memory_order_release);
  }
}

EmulatedGraph* Captures::end(EmulatedStream& stream) {
  std::lock_guard lock(mutex_);
  EmulatedCapture* capture = stream.capture();
  EMBER_CHECK(capture != nullptr, CudaError,
              "CUDA error: invalid argument (cudaStreamEndCapture on a stream that "
              "is not capturing)");
  EMBER_CHECK(capture->members.front().stream == &stream, CudaError, kUnmatched);
  EMBER_CHECK(capture->mode == CaptureMode::Relaxed || capture->thread == std::this_thread::get_id(), CudaError,
              kWrongThread);
  // From here the capture ends, whatever the outcome (cudaStreamEndCapture does).
  auto owner = *std::find_if(open_captures_.begin(), open_captures_.end(),
                             [&](const auto& open) { return open.get() == capture; });
  detach_members(*capture);
  EMBER_CHECK(!capture->invalidated, CudaError, kInvalidated);
  for (size_t i = 1; i < capture->members.size(); ++i) {
    const EmulatedCapture::Member& m = capture->members[i];
    EMBER_CHECK(m.joined >= m.count, CudaError, kUnjoined, " (a stream joined the capture through an event and ",
                m.count - m.joined, " of its captured operations are not waited for by the origin stream)");
  }
  // The items keep the graph's memory alive: replays still queued use it after the graph dies.
  struct Body {
    std::vector<WorkItem> items;
    std::vector<std::shared_ptr<void>> memory;
  };
  auto body = std::make_shared<Body>(Body{std::move(owner->items), std::move(owner->memory)});
  std::shared_ptr<const std::vector<WorkItem>> items(body, &body->items);
  return new EmulatedGraph(capture->device, std::move(items));
}

bool Captures::append(EmulatedStream& stream, WorkItem&& item) {
  std::lock_guard lock(mutex_);
  EmulatedCapture* capture = stream.capture();
  if (capture == nullptr) return false;
  EMBER_CHECK(!capture->invalidated, CudaError, kInvalidated);
  capture->items.push_back(std::move(item));
  ++capture->member(&stream)->count;
  return true;
}

bool Captures::add_memory(EmulatedStream& stream, std::shared_ptr<void> memory) {
  std::lock_guard lock(mutex_);
  EmulatedCapture* capture = stream.capture();
  if (capture == nullptr) return false;
  EMBER_CHECK(!capture->invalidated, CudaError, kInvalidated);
  capture->memory.push_back(std::move(memory));
  return true;
}

bool Captures::append_kernel(EmulatedStream& stream, const KernelCall& call) {
  return append(stream, KernelWork{call});
}

void Captures::invalidate_and_throw(const std::vector<EmulatedCapture*>& refusing, const char* what) {
  for (EmulatedCapture* capture : refusing) capture->invalidated = true;
  fail<CudaError>(kUnsupported, " (", what, ")");
}

void Captures::refuse(EmulatedStream& stream, const char* what) {
  std::lock_guard lock(mutex_);
  std::vector<EmulatedCapture*> refusing;
  if (EmulatedCapture* capture = stream.capture()) refusing.push_back(capture);
  invalidate_and_throw(refusing, what);
}

bool Captures::record(EmulatedEvent& event, EmulatedStream& stream) {
  std::lock_guard lock(mutex_);
  EmulatedCapture* capture = stream.capture();
  if (capture == nullptr) return false;
  EMBER_CHECK(!capture->invalidated, CudaError, kInvalidated);
  auto owner = *std::find_if(open_captures_.begin(), open_captures_.end(),
                             [&](const auto& open) { return open.get() == capture; });
  event.set_captured(CaptureRecord{std::move(owner), &stream, capture->member(&stream)->count});
  return true;
}

bool Captures::wait(EmulatedStream& stream, EmulatedEvent& event) {
  std::lock_guard lock(mutex_);
  EmulatedCapture* waiting = stream.capture();
  CaptureRecord record = event.captured();
  EmulatedCapture* recorded = record.capture && record.capture->open ? record.capture.get() : nullptr;
  if (recorded == nullptr) {
    if (waiting == nullptr) return false;  // an ordinary wait
    // Only in-stream order may cross into a capture: waiting on outside work is refused.
    if (event.mark() == nullptr && record.capture == nullptr) return true;  // never recorded: nothing to wait for
    waiting->invalidated = true;
    fail<CudaError>(kIsolation, " (a capturing stream waited on an event recorded outside its capture)");
  }
  if (waiting == nullptr) {
    // A fork: the stream joins the capture.
    EMBER_CHECK(!recorded->invalidated, CudaError, kInvalidated);
    EMBER_CHECK(stream.device() == recorded->device, CudaError,
                "CUDA error: invalid argument (a stream of another device cannot join a capture)");
    recorded->members.push_back({&stream});
    stream.set_capture(recorded);
    return true;
  }
  if (waiting != recorded) {
    waiting->invalidated = recorded->invalidated = true;
    fail<CudaError>(kMerge);
  }
  if (recorded->members.front().stream == &stream) {
    EmulatedCapture::Member* source = recorded->member(record.stream);
    source->joined = std::max(source->joined, record.position);
  }
  return true;  // inside one capture, issue order already orders the items
}

CaptureMode Captures::exchange_thread_mode(CaptureMode mode) noexcept {
  CaptureMode previous = thread_mode;
  thread_mode = mode;
  return previous;
}

void Captures::check_unsafe_call(int device, const char* what, bool involves_device) {
  std::lock_guard lock(mutex_);
  const auto me = std::this_thread::get_id();
  const CaptureMode caller = thread_mode;
  std::vector<EmulatedCapture*> refusing;
  for (const auto& capture : open_captures_) {
    const bool own = capture->thread == me;
    // cudaThreadExchangeStreamCaptureMode's table: a Relaxed thread is refused nothing, a
    // ThreadLocal one only by its own non-Relaxed captures, a Global one also by other
    // threads' Global captures.
    bool refuses = (caller != CaptureMode::Relaxed && own && capture->mode != CaptureMode::Relaxed) ||
                   (caller == CaptureMode::Global && !own && capture->mode == CaptureMode::Global) ||
                   (involves_device && capture->device == device);
    if (refuses) refusing.push_back(capture.get());
  }
  if (!refusing.empty()) invalidate_and_throw(refusing, what);
}

void Captures::check_event(EmulatedEvent& event, const char* what) {
  std::lock_guard lock(mutex_);
  CaptureRecord record = event.captured();
  if (record.capture == nullptr || !record.capture->open) return;
  invalidate_and_throw({record.capture.get()}, what);
}

std::pair<CaptureStatus, uint64_t> Captures::status(const EmulatedStream& stream) noexcept {
  // The common answer without the mutex: the sanitizer asks at every launch. A capture
  // begun or ended on another thread meanwhile is as unordered with this call as it
  // would be with the lock.
  if (stream.capture() == nullptr) return {CaptureStatus::None, 0};
  std::lock_guard lock(mutex_);
  EmulatedCapture* capture = stream.capture();
  if (capture == nullptr) return {CaptureStatus::None, 0};
  return {capture->invalidated ? CaptureStatus::Invalidated : CaptureStatus::Active, capture->id};
}

}  // namespace ember::detail::emulated
