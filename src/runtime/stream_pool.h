// The per-device pools that cuda::Stream() hands streams out from.
//
// Note [Stream pool]
// As torch.cuda.Stream() (c10's getStreamFromPool), a new stream handle does not make a
// backend stream: each device has, per priority, a pool of kStreamsPerPool streams handed
// out round-robin. A slot's backend stream is created the first time the slot is handed
// out, so a program that asks for 3 streams makes 3. The pool owns its streams for the
// life of the process; dropping a handle is a reference-count decrement and never waits
// for queued work. After cuda::reset_device(d) the pools of d start again empty (the old
// streams are invalid, see StreamState::native) and their backend streams are released
// once no handle refers to them.
#pragma once

#include <memory>

#include "runtime/stream_state.h"

namespace ember::detail {

inline constexpr int kStreamsPerPool = 32;
/// Priorities a pool exists for; CUDA reports at most 6 ({0, -5}).
inline constexpr int kMaxStreamPriorities = 8;

/// The next stream of `device`'s pool for `priority` (already clamped into the backend's
/// range). Throws CudaError when the backend cannot create the slot's stream; the slot
/// stays empty and a later call tries again.
std::shared_ptr<StreamState> pooled_stream(int device, int priority);

}  // namespace ember::detail
