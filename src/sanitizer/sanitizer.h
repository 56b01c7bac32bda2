// The sanitizer's hooks for the rest of ember: the switch, the backend decorator and the
// allocators' reports. See Note [Stream race detection] in sanitizer/race_detector.h.
//
// Off, the only cost anywhere is one load and a predictable branch: of the runtime's
// decorator slot in detail::backend() (the choke point every backend call passes; Note
// [Sanitizer hooks] in runtime/registry.h), and of enabled() in the caching allocators'
// free and release and in the host accessors (cpu launches, Tensor::data_ptr, item,
// to_vector).
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

namespace ember::detail {
class Backend;
struct KernelCall;
struct TensorArg;
}  // namespace ember::detail

namespace ember::detail::sanitizer {

extern std::atomic<bool> g_enabled;

inline bool enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }

/// The SanitizingBackend over `upstream` (one per process; `upstream` must live forever).
Backend& wrap(Backend& upstream);

/// A caching allocator took the block back; it reuses it for `owner`'s work (a
/// BackendStream; null: the host, for pinned blocks) once the streams in `waited`
/// (record_stream) are done. See Note [Freed blocks] in sanitizer/race_detector.h.
void on_deallocation(const void* ptr, size_t bytes, const void* owner, const std::vector<const void*>& waited) noexcept;
/// A caching allocator gave [ptr, ptr + bytes) back to the system, which synchronizes
/// `device` first (-1: pinned memory); its history ends.
void on_release(const void* ptr, size_t bytes, int device) noexcept;

/// The host is about to read or write `arg` (a cpu op's operand, data_ptr(), item(),
/// to_vector()): throws DataRaceError (or warns) when stream work it has not
/// synchronised with touches the same bytes. See Note [Host accesses] in sanitizer.cpp.
void on_host_access(const TensorArg& arg, bool write, const char* op, const char* argument, int index = -1);
/// on_host_access for every operand of a cpu launch.
void on_host_launch(const KernelCall& call);

/// Applies EMBER_CUDA_SANITIZER unless the program already called enable() or disable()
/// (which win over the environment). Called when the backend is selected, through the
/// runtime's selection hook (Note [Sanitizer hooks] in runtime/registry.h).
void configure_from_env();
/// Reads EMBER_CUDA_SANITIZER: "1" enables (Error mode), "warn" enables in Warn mode,
/// "0" or empty leave the setting as it is; another value throws ValueError.
void apply_env();

}  // namespace ember::detail::sanitizer
