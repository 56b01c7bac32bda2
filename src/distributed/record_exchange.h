// RecordExchange: the gloo group's per-collective exchange of CollectiveRecords (Note
// [Collective checks] in process_group.h), which can carry a small payload beside the
// record so that a small all_reduce needs no second exchange.
//
// Every rank sends [record | payload] to every peer over Gloo's point-to-point unbound
// buffers, at most payload_capacity() bytes of payload, and receives into slots of a fixed
// size: ranks that disagree about the payload's size (a mismatch the records then
// report) still exchange their records intact. Receives are posted within the exchange
// (not ahead of the next one), so that no message is left unread when a rank closes its
// connections after its last collective: unread data would make the close a reset that
// can cut off a peer still receiving.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/collective_record.h"

namespace ember::detail::distributed {

class RecordExchange {
 public:
  /// Payloads up to this size travel with the record in a world of `world_size` ranks:
  /// 1 MiB between two ranks (where the direct exchange moves as many bytes as a ring
  /// all-reduce), 64 KiB in larger worlds (where it moves more, and only latency favours
  /// it). The group holds world_size + 1 buffers of this size.
  static constexpr size_t payload_capacity(int world_size) noexcept {
    return world_size == 2 ? size_t{1} << 20 : size_t{64} << 10;
  }

  explicit RecordExchange(std::shared_ptr<gloo::Context> context);

  /// Sends `record` (and `payload_bytes` from `payload`, at most payload_capacity()) to
  /// every peer and receives theirs, in the slot of record.sequence. Throws
  /// gloo::Exception on a transport failure or after `timeout`.
  void exchange(const CollectiveRecord& record, const void* payload, size_t payload_bytes,
                std::chrono::milliseconds timeout);

  /// After exchange(): every rank's record, and every rank's payload (this rank's is a
  /// copy, so the caller may overwrite its own data while reading the others).
  const std::vector<CollectiveRecord>& records() const noexcept { return records_; }
  const uint8_t* payload(int rank) const noexcept;

 private:
  static constexpr size_t kHeader = (sizeof(CollectiveRecord) + 15) / 16 * 16;  // payloads stay 16-byte aligned

  std::shared_ptr<gloo::Context> context_;
  size_t slot_;  // kHeader + payload_capacity()
  std::vector<uint8_t> outbox_;
  std::vector<uint8_t> inbox_;  // one slot_ per rank (this rank's unused)
  std::unique_ptr<gloo::transport::UnboundBuffer> outbox_buffer_;
  std::unique_ptr<gloo::transport::UnboundBuffer> inbox_buffer_;
  std::vector<CollectiveRecord> records_;
};

}  // namespace ember::detail::distributed
