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

}  // namespace

void mark_left(ember::distributed::Store& store, const std::string& prefix, int rank) noexcept {
  try {
    store.set(left_key(prefix, rank), "");
  } catch (...) {
    // The store is gone: the peers will learn that instead.
  }
}

std::string describe_peers(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
                           std::chrono::milliseconds timeout, const std::string& store_host, bool timed_out) {
  auto* tcp = dynamic_cast<ember::distributed::TCPStore*>(&store);
  if (tcp != nullptr && !tcp->tracks_departures()) tcp = nullptr;  // a PyTorch store (torchrun's agent) cannot tell exits
  std::vector<int> exited, left;
  try {
    if (tcp != nullptr) exited = tcp->departed_ranks(std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(2)));
    for (int r = 0; r < world_size; ++r) {
      if (r != rank && store.check({left_key(prefix, r)})) left.push_back(r);
    }
  } catch (const DistributedError&) {
    return store_host.empty() ? "the store cannot be reached (the process serving it exited); "
                              : cat(store_host, " exited (the store it served cannot be reached); ");
  }
  std::erase_if(exited, [&](int r) { return std::find(left.begin(), left.end(), r) != left.end(); });
  std::string out;
  if (!left.empty()) out += cat(rank_list(left), " destroyed the process group (finished, or stopped calling collectives); ");
  if (!exited.empty()) out += cat(rank_list(exited), " exited; ");
  if (!out.empty()) return out;
  out = tcp != nullptr ? "no peer is known to have exited or destroyed the process group"
                       : "no peer is known to have destroyed the process group (this store cannot tell exits)";
  if (timed_out) out += cat(": a peer may be stuck, slower than the timeout (", timeout.count(), "ms) or not calling this collective");
  return out + "; ";
}

}  // namespace ember::detail::distributed
