// The per-rank record of Note [Collective checks] (src/distributed/process_group.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/distributed.h"

namespace ember::detail::distributed {

enum class Collective : uint8_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, Barrier };
/// "all_reduce", "broadcast", ...
const char* collective_name(Collective collective) noexcept;

/// Fixed size, so that ranks that disagree about everything still exchange it intact.
struct CollectiveRecord {
  uint64_t sequence = 0;
  int64_t numel = 0;
  int32_t root = -1;
  uint8_t collective = 0;
  uint8_t reduce_op = 0;
  int8_t dtype = -1;
  uint8_t failed = 0;      // this rank rejected its arguments or its stream failed
  char message[176] = {};  // why, truncated
};
static_assert(sizeof(CollectiveRecord) == 200);

CollectiveRecord make_record(uint64_t sequence, Collective collective, ember::distributed::ReduceOp op, DType dtype,
                             int64_t numel, int root);
void set_failure(CollectiveRecord& record, const std::string& message);

/// Compares every rank's record with this rank's (records[rank]); throws DistributedError
/// naming the operation and the first peer that differs or failed.
void check_records(const std::vector<CollectiveRecord>& records, int rank);

}  // namespace ember::detail::distributed
