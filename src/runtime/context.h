// Internal access to the thread-local current device and streams.
#pragma once

#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::detail {

/// The calling thread's current cuda device (initialising the backend).
int current_device_index();
/// Checks 0 <= device < device_count (IndexError "Device index value 7 is out of index range [0, 4)").
void check_device_index(int device);
/// `device` itself when >= 0 (range-checked), the current device for -1; IndexError below.
int resolve_index(int device);
/// `device` with its index resolved: "cuda" becomes "cuda:<current>" (range-checked); cpu stays cpu.
Device resolve_device(Device device);
/// The calling thread's current stream on `device` (valid while the thread runs).
StreamState* current_stream_state(int device);
StreamState* default_stream_state(int device);

}  // namespace ember::detail
