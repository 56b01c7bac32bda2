// ember::cuda::Stream and Event: handles to a device's queues of work and to positions in them.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <utility>

#include "ember/device.h"

namespace ember {
namespace detail {
class StreamState;
class EventState;
}  // namespace detail

namespace cuda {

class Event;

/// A linear sequence of work on one device (torch.cuda.Stream). A handle to a stream of
/// the device's pool: as in PyTorch, each device has 32 streams per priority, handed out
/// round-robin and created on first use, so the 33rd Stream(d) is the 1st again. Copies
/// share the stream, and so does a moved-from handle (a Stream is a value, like
/// c10::Stream). Dropping a handle never waits for the stream's work.
class Stream {
 public:
  /// The next pooled stream of the current device.
  Stream();
  /// The next pooled stream of `device` (-1: the current one) with `priority` (lower is
  /// higher priority).
  explicit Stream(int device, int priority = 0);
  /// Wraps a runtime stream; ValueError when `state` is null.
  explicit Stream(std::shared_ptr<detail::StreamState> state);
  Stream(const Stream&) = default;
  Stream& operator=(const Stream&) = default;
  Stream(Stream&& other) noexcept : state_(other.state_) {}
  Stream& operator=(Stream&& other) noexcept {
    state_ = other.state_;
    return *this;
  }

  Device device() const;
  int device_index() const;
  int priority() const;
  /// A process-unique id; 0 is the default stream of its device.
  uint64_t id() const noexcept;
  bool is_default() const noexcept;

  /// True when all work queued so far has completed.
  bool query() const;
  /// Blocks until all work queued so far has completed; raises pending asynchronous errors.
  void synchronize() const;
  /// Makes future work on this stream wait for the work queued on `other` so far.
  void wait_stream(const Stream& other) const;
  /// Makes future work on this stream wait for `event`.
  void wait_event(const Event& event) const;
  /// Records a new event on this stream and returns it.
  Event record_event() const;
  Event record_event(Event& event) const;

  /// {least priority, greatest priority}: {0, -1}, as CUDA reports.
  static std::pair<int, int> priority_range();

  friend bool operator==(const Stream& a, const Stream& b) noexcept { return a.state_ == b.state_; }

  detail::StreamState* state() const noexcept { return state_.get(); }
  const std::shared_ptr<detail::StreamState>& state_ptr() const noexcept { return state_; }

 private:
  std::shared_ptr<detail::StreamState> state_;
};

std::ostream& operator<<(std::ostream& out, const Stream& s);

/// A marker in a stream (torch.cuda.Event). Created lazily; its device is fixed by the
/// first stream that records it.
class Event {
 public:
  explicit Event(bool enable_timing = false, bool blocking = false, bool interprocess = false);

  /// Records on the current stream of the current device.
  void record();
  void record(const Stream& stream);
  /// Makes the current stream (or `stream`) wait for this event.
  void wait() const;
  void wait(const Stream& stream) const;
  /// True when the recorded work has completed (or the event was never recorded).
  bool query() const;
  /// Blocks until the recorded work has completed.
  void synchronize() const;
  /// Milliseconds between this event and `end`; both recorded, completed and timing-enabled.
  float elapsed_time(const Event& end) const;

  bool enable_timing() const noexcept { return enable_timing_; }
  bool is_recorded() const noexcept { return state_ != nullptr; }
  /// The device of the first recording stream; -1 before.
  int device_index() const noexcept;
  detail::EventState* state() const noexcept { return state_.get(); }

 private:
  bool enable_timing_;
  std::shared_ptr<detail::EventState> state_;
};

}  // namespace cuda
}  // namespace ember

template <>
struct std::hash<ember::cuda::Stream> {
  size_t operator()(const ember::cuda::Stream& s) const noexcept { return std::hash<uint64_t>()(s.id()); }
};
