// RaceDetector: happens-before tracking of stream accesses (the sanitizer's handler).
//
// Note [Stream race detection]
// As PyTorch's CSAN (torch/cuda/_sanitizer.py), apart from any backend: the
// SanitizingBackend turns backend calls into these events, tests drive it with
// made-up ids.
//   - Each stream counts the accesses it runs (seq) and keeps a vector clock: for
//     every stream, the last seq of it known to have happened before the stream's
//     next work. An access of stream s at seq n is ordered before later work of
//     stream t when clock(t)[s] >= n, or t == s.
//   - Event record copies the stream's clock into the event; event wait joins the
//     event's clock into the stream's.
//   - Synchronisations order the host after stream work: stream and event
//     synchronize (and a query that reports completion), device synchronize, a
//     stream's destruction. The host clock joins the stream's (or event's, or every
//     stream of the device's) clock. Every access is issued by the host afterwards,
//     so every stream's effective clock is max(own clock, host clock): a
//     synchronisation costs one clock join instead of one per stream.
//   - Memory is tracked by byte ranges, split where accesses begin and end, so two
//     streams touching disjoint parts of one block (halves of a tensor, the slots of
//     a flat gradient bucket) never meet: see Note [Access footprints].
//   - A range keeps its writes and, since them, the last reads of each stream. A read
//     races with an unordered write it overlaps; a write also races with unordered
//     reads. A write drops the records it covers, a read the older reads of its own
//     stream it covers (anything ordered after the newer record is ordered after the
//     older, anything racing with the older also races with the newer). Checking does
//     not change any state, so a caller can refuse the access (throw) and leave the
//     history as it was. Memory never reported (allocated before the sanitizer was
//     enabled) gets ranges on first use.
//   - Freeing a block (Note [Freed blocks]) keeps only the records the allocator
//     cannot order: the block is reused on its own stream, and streams given to
//     record_stream are waited for through events; any other stream's access still
//     races with the block's next user unless something ordered them by then. A
//     segment given back to the system (cudaFree synchronizes) drops everything.
//   - The host is an observer too (Note [Host accesses]): a cpu op on pinned memory,
//     data_ptr(), item() and to_vector() are checked against the host clock, never
//     recorded (all later stream work is issued by the host after them).
//
// Note [Freed blocks]
// PyTorch's allocator (and ember's) reuses a freed block for later work of the stream it
// was allocated on, and delays the reuse until the events of the streams given to
// record_stream have completed. A stream that used the block without record_stream is
// not waited for: its access may still be running when the block's next user writes it
// (on an emulated device this corrupts data). So a free drops the records of the owner
// and of the recorded streams and keeps the others; the next user's first access checks
// against them as against any access, and is clean when the program ordered them by
// then (a synchronisation, or the owner having waited for that stream before the free).
//
// Note [Access footprints]
// An operand touches at most the bytes from its lowest to its highest element (its
// span), exactly when it is contiguous. A strided operand whose elements repeat with a
// period P (the smallest stride whose inner dimensions fit inside it, every larger
// stride a multiple of it) touches only the bytes b of its span with
// (b - phase) mod P < width: x[::2] and x[1::2], or two columns of a matrix, are then
// told apart by their phases. Two footprints are disjoint only when both are periodic,
// one period is a multiple of the other, and their windows do not meet modulo the
// smaller period (x[::2] against x[1::4]). Any other pair whose spans overlap is treated
// as overlapping, which is conservative only where neither period divides the other
// and yet no element is shared: x[::4] against x[1::6] (periods 16 and 24 bytes) races
// if unordered, and so do x[:, ::2] and x[:, 1::2] of a matrix with an odd number of
// columns (one period with an even number).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stack_trace.h"

namespace ember::detail::sanitizer {

using StreamKey = uintptr_t;
using EventKey = uintptr_t;

enum class AccessType : uint8_t { Read, Write };

/// The bytes an access touches within its span: all of them (period 0), or those b with
/// (b - phase) mod period < width (Note [Access footprints]).
struct Footprint {
  uint64_t period = 0;
  uint64_t phase = 0;  // < period
  uint64_t width = 0;  // < period
  bool dense() const noexcept { return period == 0; }
  /// Whether no byte is in both (only provable for one period).
  bool disjoint(const Footprint& other) const noexcept;
  /// Whether every byte of `other` is in this one.
  bool covers(const Footprint& other) const noexcept;
};

/// One operand of a kernel or copy: the bytes [begin, end) it reads or writes.
struct MemoryAccess {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  AccessType type = AccessType::Read;
  const char* argument = "";  // "output", "input", "destination", "source"
  int index = -1;             // the operand's position among its kind; -1 when alone
  Footprint footprint;        // dense unless a strided operand
};

/// A recorded access: who touched the range, and from where.
struct AccessRecord {
  AccessType type = AccessType::Read;
  uint32_t stream = 0;  // the detector's stream number
  uint64_t seq = 0;
  const char* op = "";
  const char* argument = "";
  int index = -1;
  std::shared_ptr<const StackTrace> stack;  // shared by the accesses of one op; may be null
  Footprint footprint;
};

struct StreamDescription {
  StreamKey key = 0;
  uint32_t number = 0;  // in order of first sight, from 0
  int device = -1;      // -1 when the detector was never told
  bool is_default = false;
  bool is_host = false;  // the host itself (Note [Host accesses])
};

/// A possible race: `current` would touch `pointer` (its operand's lowest byte)
/// unordered after `previous`.
struct DataRace {
  uintptr_t pointer = 0;
  AccessRecord current;
  AccessRecord previous;
  StreamDescription current_stream;
  StreamDescription previous_stream;
};

class RaceDetector {
 public:
  /// Streams: the device is recorded for device synchronisation and reports.
  void stream_created(StreamKey stream, int device, bool is_default = false);
  void stream_destroyed(StreamKey stream);
  void event_created(EventKey event);
  void event_destroyed(EventKey event);

  void event_record(EventKey event, StreamKey stream);
  void event_wait(StreamKey stream, EventKey event);
  void event_synchronize(EventKey event);
  void stream_synchronize(StreamKey stream);
  /// Every stream of `device`, and streams whose device is unknown; -1: every stream.
  void device_synchronize(int device);

  /// A caching allocator handed the block out: it keeps what its free left.
  void memory_allocation(uintptr_t pointer, size_t bytes);
  /// Memory given back to the system, or a block whose users are all ordered: no history.
  void memory_deallocation(uintptr_t pointer, size_t bytes);
  /// A caching allocator took the block back: it will reuse it on `owner` (0: the host,
  /// the pinned allocator) after the streams in `waited` (record_stream) are done, so
  /// only the records of other streams stay (Note [Freed blocks]).
  void block_freed(uintptr_t pointer, size_t bytes, StreamKey owner, const std::vector<StreamKey>& waited);

  /// The races `accesses` of one op on `stream` would cause; changes nothing.
  std::vector<DataRace> check(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
                              const std::shared_ptr<const StackTrace>& stack);
  /// The races host accesses would cause with stream work the host has not synchronised
  /// with (Note [Host accesses]); nothing is recorded.
  std::vector<DataRace> check_host(const std::vector<MemoryAccess>& accesses, const char* op);
  /// Records the accesses as the stream's next work (seq + 1).
  void record(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
              const std::shared_ptr<const StackTrace>& stack, int device = -1);

  /// Forgets everything (enable() starts from a clean slate).
  void reset();

  StreamDescription describe(StreamKey stream);
  /// Sizes, for tests: streams seen, ranges with history.
  size_t stream_count() const noexcept { return streams_.size(); }
  size_t range_count() const noexcept { return ranges_.size(); }

 private:
  struct StreamInfo {
    int device = -1;
    bool is_default = false;
    uint64_t seq = 0;
    std::vector<uint64_t> clock;  // indexed by stream number
  };
  struct Range {
    uintptr_t end = 0;
    std::vector<AccessRecord> writes;  // none covers another
    std::vector<AccessRecord> reads;   // since the writes they overlap
  };

  uint32_t number_of(StreamKey stream);
  /// clock(stream)[other], including what the host has synchronised with.
  uint64_t known(uint32_t stream, uint32_t other) const;
  bool ordered(const AccessRecord& previous, uint32_t stream) const;
  /// Whether the host has synchronised with `previous`.
  bool ordered_by_host(const AccessRecord& previous) const;
  void host_join(const std::vector<uint64_t>& clock);
  void erase_ranges(uintptr_t begin, uintptr_t end);
  StreamDescription describe_number(uint32_t number) const;
  /// Calls f(range) for each range overlapping [begin, end).
  template <typename F>
  void for_each_range(uintptr_t begin, uintptr_t end, F&& f);
  /// Splits the ranges at `begin` and `end` and fills the gaps between them, so that
  /// [begin, end) is exactly a run of ranges; returns the first.
  std::map<uintptr_t, Range>::iterator cover(uintptr_t begin, uintptr_t end);
  void split_at(uintptr_t at);
  /// The races of `accesses` by stream `n` (host: ordered by the host clock alone).
  std::vector<DataRace> find_races(uint32_t n, bool host, const std::vector<MemoryAccess>& accesses, const char* op,
                                   const std::shared_ptr<const StackTrace>& stack);

  std::unordered_map<StreamKey, uint32_t> numbers_;
  std::vector<StreamInfo> streams_;
  std::vector<StreamKey> keys_;  // by stream number
  std::vector<uint64_t> host_clock_;
  std::unordered_map<EventKey, std::vector<uint64_t>> events_;
  std::map<uintptr_t, Range> ranges_;  // by begin; disjoint
};

}  // namespace ember::detail::sanitizer
