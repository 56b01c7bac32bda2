// ember::cuda::sanitizer: the stream race sanitizer (PyTorch's torch.cuda._sanitizer, CSAN).
//
// When enabled, every kernel, copy, event operation, synchronisation and allocation on
// a cuda backend (driver or emulated) is observed; an access to memory that another
// stream touched without ordering between the two (events, wait_stream, stream, event
// or device synchronisation) raises ember::DataRaceError from the call that made it,
// and so does a host access to pinned memory (a cpu op, data_ptr(), item(), to_vector())
// that a copy not yet synchronised with still reads or writes, and the first use of a
// block freed without record_stream while another stream still used it. Disjoint byte
// ranges of one allocation (halves, slots, elements interleaved with one period) do not
// race. A report's message starts "CSAN detected a possible data race on tensor with
// data pointer 0x...", then names both accesses (stream or the host, op, read or write,
// argument) with a stack trace of each. Off by default; EMBER_CUDA_SANITIZER=1 enables
// it at the first cuda call, EMBER_CUDA_SANITIZER=warn enables it in warn mode; an
// enable() or disable() before that call wins over the variable.
#pragma once

namespace ember::cuda::sanitizer {

enum class Mode {
  Error,  // throw DataRaceError; the racing call does not run
  Warn,   // print the report to stderr and run the call
};

/// Starts checking from a clean history (torch.cuda._sanitizer.enable_cuda_sanitizer()).
void enable(Mode mode = Mode::Error);
/// Stops checking; the history is dropped at the next enable().
void disable();
bool is_enabled() noexcept;
/// The mode of the last enable(); Error before any.
Mode mode() noexcept;
/// Races reported in Warn mode since the last enable().
long warnings() noexcept;

}  // namespace ember::cuda::sanitizer
