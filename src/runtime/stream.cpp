// cuda::Stream, the per-thread current stream of each device, and StreamGuard.
//
// Note [Current streams]
// Each host thread has, per device, a current stream that starts as the device's default
// stream. The slot holds a raw pointer for the hot path (current_stream_state: one
// thread-local read and one generation check, no lock, no refcount) and a shared_ptr
// that keeps a non-default current stream alive. A slot made before reset_device() is
// stale and falls back to the default stream.
#include <algorithm>
#include <array>
#include <atomic>
#include <ostream>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/context.h"
#include "runtime/registry.h"
#include "runtime/stream_pool.h"

namespace ember::detail {
namespace {

struct CurrentStreamSlot {
  StreamState* stream = nullptr;  // null: the default stream
  std::shared_ptr<StreamState> owner;
  uint64_t generation = 0;
};

thread_local std::array<CurrentStreamSlot, kMaxDevices> t_current_streams;

}  // namespace

StreamState::~StreamState() {
  if (!owned_) return;
  if (Backend* b = backend_or_null()) b->destroy_stream(native_);
}

BackendStream* StreamState::native() const {
  if (owned_ && generation_ != device_generation(device_)) [[unlikely]] {
    fail<CudaError>("CUDA error: invalid resource handle: this stream was created on cuda:", device_,
                    " before the device was reset (ember::cuda::reset_device)");
  }
  return native_;
}

StreamState* default_stream_state(int device) {
  check_device_index(device);
  return runtime().default_streams[static_cast<size_t>(device)].get();
}

StreamState* current_stream_state(int device) {
  check_device_index(device);
  const CurrentStreamSlot& slot = t_current_streams[static_cast<size_t>(device)];
  if (slot.stream != nullptr && slot.generation == device_generation(device)) return slot.stream;
  return runtime().default_streams[static_cast<size_t>(device)].get();
}

namespace {

std::shared_ptr<StreamState> shared_state(StreamState* state) {
  if (state->is_default()) return runtime().default_streams[static_cast<size_t>(state->device())];
  return t_current_streams[static_cast<size_t>(state->device())].owner;
}

}  // namespace
}  // namespace ember::detail

namespace ember::cuda {

Stream::Stream() : Stream(-1, 0) {}

Stream::Stream(int device, int priority) {
  int index = detail::resolve_index(device);
  detail::Backend& b = detail::backend();
  auto [least, greatest] = b.priority_range();
  // CUDA clamps out-of-range priorities; a pool exists for each of the first
  // kMaxStreamPriorities of the range.
  priority = std::clamp(priority, std::max(greatest, least - (detail::kMaxStreamPriorities - 1)), least);
  state_ = detail::pooled_stream(index, priority);  // Note [Stream pool]
}

Stream::Stream(std::shared_ptr<detail::StreamState> state) : state_(std::move(state)) {
  EMBER_CHECK(state_ != nullptr, ValueError, "cuda::Stream: the stream state is null");
}

Device Stream::device() const { return Device(kCUDA, device_index()); }
int Stream::device_index() const { return state_->device(); }
int Stream::priority() const { return state_->priority(); }
uint64_t Stream::id() const noexcept { return state_->id(); }
bool Stream::is_default() const noexcept { return state_->is_default(); }

bool Stream::query() const { return detail::backend().query(state_->native()); }

void Stream::synchronize() const { detail::backend().synchronize(state_->native()); }

void Stream::wait_stream(const Stream& other) const {
  if (other == *this) return;
  Event event;
  event.record(other);
  wait_event(event);
}

void Stream::wait_event(const Event& event) const { event.wait(*this); }

Event Stream::record_event() const {
  Event event;
  event.record(*this);
  return event;
}

Event Stream::record_event(Event& event) const {
  event.record(*this);
  return event;
}

std::pair<int, int> Stream::priority_range() { return detail::backend().priority_range(); }

std::ostream& operator<<(std::ostream& out, const Stream& s) {
  // The default stream is CUDA's legacy stream, handle 0, as PyTorch prints it.
  const void* handle = s.is_default() ? nullptr : static_cast<const void*>(s.state()->native_unchecked());
  return out << "<ember.cuda.Stream device=cuda:" << s.device_index() << " cuda_stream=0x" << std::hex
             << reinterpret_cast<uintptr_t>(handle) << std::dec << ">";
}

Stream current_stream(int device) {
  int index = detail::resolve_index(device);
  detail::StreamState* state = detail::current_stream_state(index);
  return Stream(detail::shared_state(state));
}

Stream default_stream(int device) {
  int index = detail::resolve_index(device);
  return Stream(detail::runtime().default_streams[static_cast<size_t>(index)]);
}

void set_stream(const Stream& stream) {
  // As torch.cuda.set_stream: the stream's device becomes current too.
  int index = stream.device_index();
  stream.state()->native();  // a stream from before a reset cannot become current
  set_device(index);
  detail::CurrentStreamSlot& slot = detail::t_current_streams[static_cast<size_t>(index)];
  if (stream.is_default()) {
    slot = {};
  } else {
    slot = {stream.state(), stream.state_ptr(), stream.state()->generation()};
  }
}

StreamGuard::StreamGuard(const Stream& stream)
    : original_device_(current_device()), original_stream_(current_stream(stream.device_index())) {
  set_stream(stream);
}

StreamGuard::~StreamGuard() {
  try {
    int stream_device = original_stream_.device_index();
    detail::CurrentStreamSlot& slot = detail::t_current_streams[static_cast<size_t>(stream_device)];
    if (original_stream_.is_default()) {
      slot = {};
    } else {
      slot = {original_stream_.state(), original_stream_.state_ptr(), original_stream_.state()->generation()};
    }
    set_device(original_device_);
  } catch (...) {
    // Both were valid when the guard was made.
  }
}

void sleep(std::chrono::nanoseconds duration) {
  EMBER_CHECK(duration.count() >= 0, ValueError, "sleep: the duration must be non-negative, but got ", duration.count(),
              " ns");
  int device = current_device();
  detail::backend().sleep(detail::current_stream_state(device)->native(), duration);
}

}  // namespace ember::cuda
