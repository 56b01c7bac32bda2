// StreamState and EventState: the runtime objects behind cuda::Stream and cuda::Event.
#pragma once

#include <cstdint>

#include "runtime/backend.h"

namespace ember::detail {

class StreamState {
 public:
  StreamState(int device, int priority, uint64_t id, BackendStream* native, bool owned, uint64_t generation)
      : device_(device), priority_(priority), id_(id), native_(native), owned_(owned), generation_(generation) {}
  ~StreamState();
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  int device() const noexcept { return device_; }
  int priority() const noexcept { return priority_; }
  uint64_t id() const noexcept { return id_; }
  bool is_default() const noexcept { return !owned_; }
  /// The device's reset generation when this stream was made.
  uint64_t generation() const noexcept { return generation_; }
  /// The backend stream; throws CudaError if the device was reset after this stream was made.
  BackendStream* native() const;
  /// Without the reset check, for hot paths that already validated.
  BackendStream* native_unchecked() const noexcept { return native_; }

 private:
  int device_;
  int priority_;
  uint64_t id_;
  BackendStream* native_;
  bool owned_;
  uint64_t generation_;
};

class EventState {
 public:
  EventState(int device, BackendEvent* native, bool timing, uint64_t generation)
      : device_(device), native_(native), timing_(timing), generation_(generation) {}
  ~EventState();
  EventState(const EventState&) = delete;
  EventState& operator=(const EventState&) = delete;

  int device() const noexcept { return device_; }
  bool timing() const noexcept { return timing_; }
  uint64_t generation() const noexcept { return generation_; }
  /// Throws CudaError if the device was reset after this event was made.
  BackendEvent* native() const;

 private:
  int device_;
  BackendEvent* native_;
  bool timing_;
  uint64_t generation_;
};

/// Reset generation of a device (bumped by cuda::reset_device).
uint64_t device_generation(int device);

}  // namespace ember::detail
