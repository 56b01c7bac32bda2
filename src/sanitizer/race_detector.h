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
//   - Memory is tracked by ranges. An allocation (the caching allocators report
//     each block they hand out, a reused one included) or a free erases the history
//     of its range, so a block reused on another stream starts clean. Accesses to
//     memory never reported (allocated before the sanitizer was enabled) get a range
//     of their own on first use.
//   - A range keeps its last write and, since that write, the last read of each
//     stream. A read races with an unordered last write; a write also races with
//     unordered reads. Checking does not change any state, so a caller can refuse
//     the access (throw) and leave the history as it was.
// Accesses from the host itself (cpu ops on pinned memory) are not tracked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stack_trace.h"

namespace ember::detail::sanitizer {

using StreamKey = uintptr_t;
using EventKey = uintptr_t;

enum class AccessType : uint8_t { Read, Write };

/// One operand of a kernel or copy: the bytes [begin, end) it reads or writes.
struct MemoryAccess {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  AccessType type = AccessType::Read;
  const char* argument = "";  // "output", "input", "destination", "source"
  int index = -1;             // the operand's position among its kind; -1 when alone
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
};

struct StreamDescription {
  StreamKey key = 0;
  uint32_t number = 0;  // in order of first sight, from 0
  int device = -1;      // -1 when the detector was never told
  bool is_default = false;
};

/// A possible race: `current` would touch `pointer`'s range unordered after `previous`.
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

  void memory_allocation(uintptr_t pointer, size_t bytes);
  void memory_deallocation(uintptr_t pointer, size_t bytes);

  /// The races `accesses` of one op on `stream` would cause; changes nothing.
  std::vector<DataRace> check(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
                              const std::shared_ptr<const StackTrace>& stack);
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
    std::optional<AccessRecord> write;
    std::vector<AccessRecord> reads;  // since `write`, the last of each stream
  };

  uint32_t number_of(StreamKey stream);
  /// clock(stream)[other], including what the host has synchronised with.
  uint64_t known(uint32_t stream, uint32_t other) const;
  bool ordered(const AccessRecord& previous, uint32_t stream) const;
  void host_join(const std::vector<uint64_t>& clock);
  void erase_ranges(uintptr_t begin, uintptr_t end);
  StreamDescription describe_number(uint32_t number) const;
  /// The ranges overlapping [begin, end), creating one when there is none.
  template <typename F>
  void for_each_range(uintptr_t begin, uintptr_t end, F&& f);

  std::unordered_map<StreamKey, uint32_t> numbers_;
  std::vector<StreamInfo> streams_;
  std::vector<StreamKey> keys_;  // by stream number
  std::vector<uint64_t> host_clock_;
  std::unordered_map<EventKey, std::vector<uint64_t>> events_;
  std::map<uintptr_t, Range> ranges_;  // by begin; disjoint
};

}  // namespace ember::detail::sanitizer
