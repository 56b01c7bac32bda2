// What a rank knows about its peers when a collective fails on the transport, for the
// start of the error's message.
//
// Note [Peers in transport errors]
// A broken connection or a timeout says nothing about why. Three things are known:
//  - a peer that destroyed its process group marked "<prefix>left/<rank>" in the store
//    first (mark_left): with "" when it finished or stopped calling collectives (a cause),
//    with "failed" when its group had failed already (a peer that died made it fail too:
//    not a cause, and never named as one);
//  - a TCPStore's host saw which registered ranks' connections closed without
//    leave(): those processes exited (TCPStore::departed_ranks waits up to 2 s for one);
//  - when the store itself cannot be reached, whoever served it (rank 0, or the
//    launcher's agent) is gone.
// When none is known, the message says so and, for a timeout, what may be the cause;
// it never claims that no peer exited (a file store cannot tell). Where the store cannot
// tell exits (a file store, PyTorch's store under torchrun) and no peer left as a cause,
// the message says that the rank whose failure started it is unknown.
#pragma once

#include <chrono>
#include <string>

#include "ember/distributed.h"

namespace ember::detail::distributed {

/// Marks `rank` as having destroyed its group under `prefix`, `after_failure` when the
/// group had failed before (Note [Peers in transport errors]); never throws.
void mark_left(ember::distributed::Store& store, const std::string& prefix, int rank, bool after_failure) noexcept;

/// The known state of `rank`'s peers, ending in "; ". `store_host` names who serves the
/// store ("rank 0", "the launcher"; "" when unknown); `timed_out`: the transport error
/// was a timeout.
std::string describe_peers(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
                           std::chrono::milliseconds timeout, const std::string& store_host, bool timed_out);

}  // namespace ember::detail::distributed
