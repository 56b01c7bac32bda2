#include "distributed/peer_report.h"

#include <algorithm>
#include <vector>

#include "ember/errors.h"

namespace ember::detail::distributed {
namespace {

std::string left_key(const std::string& prefix, int rank) { return prefix + "left/" + std::to_string(rank); }

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "peer rank " : "peer ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// The value of a left key when the group had failed first (Note [Peers in transport errors]).
constexpr const char* kLeftAfterFailure = "failed";

}  // namespace

void mark_left(ember::distributed::Store& store, const std::string& prefix, int rank, bool after_failure) noexcept {
  try {
    store.set(left_key(prefix, rank), after_failure ? kLeftAfterFailure : "");
  } catch (...) {
    // The store is gone: the peers will learn that instead.
  }
}

std::string describe_peers(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
                           std::chrono::milliseconds timeout, const std::string& store_host, bool timed_out) {
  auto* tcp = dynamic_cast<ember::distributed::TCPStore*>(&store);
  if (tcp != nullptr && !tcp->tracks_departures())
    tcp = nullptr;                        // a PyTorch store (torchrun's agent) cannot tell exits
  std::vector<int> exited, left, failed;  // failed: left after its group had failed
  try {
    if (tcp != nullptr)
      exited = tcp->departed_ranks(std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(2)));
    for (int r = 0; r < world_size; ++r) {
      if (r == rank || !store.check({left_key(prefix, r)})) continue;
      (store.get(left_key(prefix, r)) == kLeftAfterFailure ? failed : left).push_back(r);
    }
  } catch (const DistributedError&) {
    return store_host.empty() ? "the store cannot be reached (the process serving it exited); "
                              : cat(store_host, " exited (the store it served cannot be reached); ");
  }
  const auto in = [](const std::vector<int>& ranks, int r) {
    return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
  };
  std::erase_if(exited, [&](int r) { return in(left, r) || in(failed, r); });
  std::string out;
  if (!left.empty())
    out += cat(rank_list(left), " destroyed the process group (finished, or stopped calling collectives); ");
  if (!exited.empty()) out += cat(rank_list(exited), " exited; ");
  std::string after = failed.empty() ? "" : cat(rank_list(failed), " failed too and destroyed the process group; ");
  if (!out.empty()) return out + after;
  if (tcp == nullptr) {
    // Note [Peers in transport errors]: no exit is known here, so no cause is.
    out =
        "the rank whose failure started this is unknown (this store cannot tell exits, and no peer is known to "
        "have destroyed the process group)";
  } else {
    out = "no peer is known to have exited or destroyed the process group";
  }
  if (timed_out)
    out +=
        cat(": a peer may be stuck, slower than the timeout (", timeout.count(), "ms) or not calling this collective");
  return out + "; " + after;
}

}  // namespace ember::detail::distributed
