// Direct access to the emulated backend, for tests of behaviour only it offers (host
// functions on a stream, its memory accounting).
#pragma once

#include <functional>
#include <utility>

#include "backends/emulated/emulated_backend.h"
#include "ember/cuda.h"
#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::testing {

/// The process's backend, which must be the emulated one (under the stream sanitizer,
/// the backend its decorator wraps).
inline detail::emulated::EmulatedBackend& emulated() {
  return dynamic_cast<detail::emulated::EmulatedBackend&>(detail::undecorated_backend());
}

/// Queues `fn` on `s` as a host function (cudaLaunchHostFunc).
inline void on_stream(const cuda::Stream& s, std::function<void()> fn) {
  emulated().launch_host_function(s.state()->native(), std::move(fn));
}

}  // namespace ember::testing
