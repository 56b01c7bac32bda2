// RecordExchange: the gloo group's per-collective exchange of CollectiveRecords (Note
// [Collective checks] in process_group.h), one all-gather that can carry a small
// all_reduce's data beside each record.
//
// Every rank contributes one slot of a fixed size, [record | up to kPayloadCapacity bytes
// of payload], to a single gloo::allgatherv whose per-rank counts are all that slot size
// (an all-gather; allgatherv moves each slot as one transfer per ring step where
// gloo::allgather splits it in two). Ember adds no transfer of its own. The slot's size
// does not depend on the collective's arguments, so ranks that disagree about a tensor's
// size, or call different collectives, still gather each other's records intact, and the
// records then report the mismatch.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/collective_record.h"

namespace ember::detail::distributed {

class RecordExchange {
 public:
  /// The payload room in every rank's slot (any world size); an all_reduce of at most
  /// this many bytes sends its data in the exchange. Every exchange moves the whole slot.
  static constexpr size_t kPayloadCapacity = size_t{64} << 10;

  explicit RecordExchange(std::shared_ptr<gloo::Context> context);

  /// Gathers every rank's [record | payload] with gloo::allgatherv under `tag` (which must
  /// differ from the tags of the group's other Gloo calls in flight). `payload_bytes` from
  /// `payload` travel in this rank's slot, at most kPayloadCapacity. Throws
  /// gloo::Exception on a transport failure or after `timeout`.
  void exchange(const CollectiveRecord& record, const void* payload, size_t payload_bytes, uint32_t tag,
                std::chrono::milliseconds timeout);

  /// After exchange(): every rank's record, and the start of every rank's payload slot
  /// (this rank's is a copy, so the caller may overwrite its own data while reading them).
  const std::vector<CollectiveRecord>& records() const noexcept { return records_; }
  const uint8_t* payload(int rank) const noexcept;

 private:
  static constexpr size_t kHeader = (sizeof(CollectiveRecord) + 15) / 16 * 16;  // payloads stay 16-byte aligned
  static constexpr size_t kSlot = kHeader + kPayloadCapacity;

  std::shared_ptr<gloo::Context> context_;
  std::vector<uint8_t> slots_;  // kSlot per rank, in rank order: the gather's output, in place
  std::vector<CollectiveRecord> records_;
};

}  // namespace ember::detail::distributed
