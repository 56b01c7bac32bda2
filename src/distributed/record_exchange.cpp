#include "distributed/record_exchange.h"

#include <gloo/common/error.h>
#include <gloo/types.h>

#include <cstring>

#include "ember/errors.h"

namespace ember::detail::distributed {
namespace {

constexpr uint8_t kRecordSlotPrefix = 0x45;  // beside Gloo's algorithms' prefixes (0x01..0x08)

uint64_t slot_of(uint64_t sequence) { return gloo::Slot::build(kRecordSlotPrefix, static_cast<uint32_t>(sequence)); }

}  // namespace

RecordExchange::RecordExchange(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)),
      slot_(kHeader + payload_capacity(context_->size)),
      outbox_(slot_),
      inbox_(slot_ * static_cast<size_t>(context_->size)),
      records_(static_cast<size_t>(context_->size)) {
  outbox_buffer_ = context_->createUnboundBuffer(outbox_.data(), outbox_.size());
  inbox_buffer_ = context_->createUnboundBuffer(inbox_.data(), inbox_.size());
}

void RecordExchange::exchange(const CollectiveRecord& record, const void* payload, size_t payload_bytes,
                              std::chrono::milliseconds timeout) {
  EMBER_CHECK(kHeader + payload_bytes <= slot_, ValueError, "record exchange: a payload of ", payload_bytes,
              " bytes exceeds the capacity of ", slot_ - kHeader);
  std::memcpy(outbox_.data(), &record, sizeof(record));
  if (payload_bytes > 0) std::memcpy(outbox_.data() + kHeader, payload, payload_bytes);
  int peers = context_->size - 1;
  uint64_t slot = slot_of(record.sequence);
  for (int peer = 0; peer < context_->size; ++peer) {
    if (peer != context_->rank) inbox_buffer_->recv(peer, slot, static_cast<size_t>(peer) * slot_, slot_);
  }
  for (int peer = 0; peer < context_->size; ++peer) {
    if (peer != context_->rank) outbox_buffer_->send(peer, slot, 0, kHeader + payload_bytes);
  }
  for (int i = 0; i < peers; ++i) {
    if (!inbox_buffer_->waitRecv(nullptr, timeout)) throw gloo::IoException("the record exchange was aborted");
  }
  for (int i = 0; i < peers; ++i) {
    if (!outbox_buffer_->waitSend(nullptr, timeout)) throw gloo::IoException("the record exchange was aborted");
  }
  for (int r = 0; r < context_->size; ++r) {
    if (r == context_->rank) {
      records_[static_cast<size_t>(r)] = record;
    } else {
      std::memcpy(&records_[static_cast<size_t>(r)], inbox_.data() + static_cast<size_t>(r) * slot_, sizeof(record));
    }
  }
}

const uint8_t* RecordExchange::payload(int rank) const noexcept {
  if (rank == context_->rank) return outbox_.data() + kHeader;
  return inbox_.data() + static_cast<size_t>(rank) * slot_ + kHeader;
}

}  // namespace ember::detail::distributed
