#include "distributed/record_exchange.h"

#include <gloo/allgatherv.h>

#include <cstring>

#include "ember/errors.h"

namespace ember::detail::distributed {

RecordExchange::RecordExchange(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)),
      slots_(kSlot * static_cast<size_t>(context_->size)),
      records_(static_cast<size_t>(context_->size)) {}

void RecordExchange::exchange(const CollectiveRecord& record, const void* payload, size_t payload_bytes, uint32_t tag,
                              std::chrono::milliseconds timeout) {
  EMBER_CHECK(payload_bytes <= kPayloadCapacity, ValueError, "record exchange: a payload of ", payload_bytes,
              " bytes exceeds the capacity of ", kPayloadCapacity);
  uint8_t* mine = slots_.data() + static_cast<size_t>(context_->rank) * kSlot;
  std::memcpy(mine, &record, sizeof(record));
  if (payload_bytes > 0) std::memcpy(mine + kHeader, payload, payload_bytes);
  // Every rank's count is kSlot. No input buffer: Gloo gathers in place, this rank's slot
  // already at its offset.
  gloo::AllgathervOptions options(context_);
  options.setOutput(slots_.data(), std::vector<size_t>(static_cast<size_t>(context_->size), kSlot));
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allgatherv(options);
  for (size_t r = 0; r < records_.size(); ++r) std::memcpy(&records_[r], slots_.data() + r * kSlot, sizeof(record));
}

const uint8_t* RecordExchange::payload(int rank) const noexcept {
  return slots_.data() + static_cast<size_t>(rank) * kSlot + kHeader;
}

}  // namespace ember::detail::distributed
