// cuda::Event: a marker in a stream, created lazily on the device of its first recording.
#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/context.h"
#include "runtime/registry.h"

namespace ember::detail {

EventState::~EventState() {
  if (Backend* b = backend_or_null()) b->destroy_event(native_);
}

BackendEvent* EventState::native() const {
  if (generation_ != device_generation(device_)) [[unlikely]] {
    fail<CudaError>("CUDA error: invalid resource handle: this event was created on cuda:", device_,
                    " before the device was reset (ember::cuda::reset_device)");
  }
  return native_;
}

}  // namespace ember::detail

namespace ember::cuda {

Event::Event(bool enable_timing, bool /*blocking*/, bool /*interprocess*/) : enable_timing_(enable_timing) {}

int Event::device_index() const noexcept { return state_ ? state_->device() : -1; }

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  detail::Backend& b = detail::backend();
  int device = stream.device_index();
  detail::BackendStream* native_stream = stream.state()->native();
  if (state_ == nullptr) {
    state_ = std::make_shared<detail::EventState>(device, b.create_event(device, enable_timing_), enable_timing_,
                                                  detail::device_generation(device));
  }
  EMBER_CHECK(state_->device() == device, ValueError, "Event device ", state_->device(),
              " does not match recording stream's device ", device, ".");
  b.record(state_->native(), native_stream);
}

void Event::wait() const { wait(current_stream()); }

void Event::wait(const Stream& stream) const {
  if (state_ == nullptr) return;  // never recorded: nothing to wait for, as in PyTorch
  detail::backend().wait(stream.state()->native(), state_->native());
}

bool Event::query() const {
  if (state_ == nullptr) return true;
  return detail::backend().query(state_->native());
}

void Event::synchronize() const {
  if (state_ == nullptr) return;
  detail::backend().synchronize(state_->native());
}

float Event::elapsed_time(const Event& end) const {
  EMBER_CHECK(enable_timing_ && end.enable_timing_, ValueError,
              "Both events must be created with argument 'enable_timing=True'.");
  EMBER_CHECK(state_ != nullptr && end.state_ != nullptr, ValueError,
              "Both events must be recorded before calculating elapsed time.");
  EMBER_CHECK(query() && end.query(), ValueError, "Both events must be completed before calculating elapsed time.");
  return detail::backend().elapsed_ms(state_->native(), end.state_->native());
}

}  // namespace ember::cuda
