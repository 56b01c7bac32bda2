// What a rank knows about its peers when a collective fails on the transport, for the
// start of the error's message.
//
// Note [Peers in transport errors]
// A broken connection or a timeout says nothing about why. Three things are known:
//  - a peer that destroyed its process group (it finished, or stopped calling
//    collectives) marked "<prefix>left/<rank>" in the store first (mark_left);
//  - a TCPStore's host saw which registered ranks' connections closed without
//    leave(): those processes exited (TCPStore::departed_ranks waits up to 2 s for one);
//  - when the store itself cannot be reached, whoever served it (rank 0, or the
//    launcher's agent) is gone.
// When none is known, the message says so and, for a timeout, what may be the cause;
// it never claims that no peer exited (a file store cannot tell).
#pragma once

#include <chrono>
#include <string>

#include "ember/distributed.h"

namespace ember::detail::distributed {

/// Marks `rank` as having destroyed its group under `prefix`; never throws.
void mark_left(ember::distributed::Store& store, const std::string& prefix, int rank) noexcept;

/// The known state of `rank`'s peers, ending in "; ". `store_host` names who serves the
/// store ("rank 0", "the launcher"; "" when unknown); `timed_out`: the transport error
/// was a timeout.
std::string describe_peers(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
                           std::chrono::milliseconds timeout, const std::string& store_host, bool timed_out);

}  // namespace ember::detail::distributed
