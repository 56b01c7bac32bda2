#include "distributed/collective_record.h"

#include <algorithm>
#include <cstring>

#include "ember/errors.h"

namespace ember::detail::distributed {

const char* collective_name(Collective collective) noexcept {
  switch (collective) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Barrier: return "barrier";
  }
  return "an unknown collective";
}

CollectiveRecord make_record(uint64_t sequence, Collective collective, ember::distributed::ReduceOp op, DType dtype,
                             int64_t numel, int root) {
  CollectiveRecord record;
  record.sequence = sequence;
  record.collective = static_cast<uint8_t>(collective);
  record.reduce_op = static_cast<uint8_t>(op);
  record.dtype = static_cast<int8_t>(dtype);
  record.numel = numel;
  record.root = root;
  return record;
}

void set_failure(CollectiveRecord& record, const std::string& message) {
  record.failed = 1;
  size_t n = std::min(message.size(), sizeof(record.message) - 1);
  std::memcpy(record.message, message.data(), n);
  record.message[n] = '\0';
}

namespace {

std::string describe(const CollectiveRecord& r) {
  auto collective = static_cast<Collective>(r.collective);
  std::string text = collective_name(collective);
  if (collective == Collective::Barrier) return text;
  text += cat(" of ", r.numel, " element", r.numel == 1 ? "" : "s", " of ", dtype_name(static_cast<DType>(r.dtype)));
  if (collective == Collective::AllReduce || collective == Collective::ReduceScatter) {
    text += cat(" with ", ember::distributed::reduce_op_name(static_cast<ember::distributed::ReduceOp>(r.reduce_op)));
  }
  if (collective == Collective::Broadcast) text += cat(" from rank ", r.root);
  return text;
}

}  // namespace

void check_records(const std::vector<CollectiveRecord>& records, int rank) {
  const CollectiveRecord& mine = records[static_cast<size_t>(rank)];
  const char* op = collective_name(static_cast<Collective>(mine.collective));
  for (size_t peer = 0; peer < records.size(); ++peer) {
    const CollectiveRecord& theirs = records[peer];
    if (static_cast<int>(peer) == rank || !theirs.failed) continue;
    fail<DistributedError>(op, " (collective #", mine.sequence, "): rank ", peer, " failed: ", theirs.message);
  }
  for (size_t peer = 0; peer < records.size(); ++peer) {
    const CollectiveRecord& theirs = records[peer];
    if (static_cast<int>(peer) == rank) continue;
    bool same = theirs.sequence == mine.sequence && theirs.collective == mine.collective &&
                (mine.collective == static_cast<uint8_t>(Collective::Barrier) ||
                 (theirs.numel == mine.numel && theirs.dtype == mine.dtype && theirs.root == mine.root &&
                  theirs.reduce_op == mine.reduce_op));
    if (!same) {
      fail<DistributedError>(op, " (collective #", mine.sequence, "): rank ", peer, " called ", describe(theirs),
                             " (collective #", theirs.sequence, ") while rank ", rank, " called ", describe(mine),
                             "; every rank must call the same collectives, in the same order, on matching tensors");
    }
  }
}

}  // namespace ember::detail::distributed
