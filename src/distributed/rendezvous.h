// Where init_process_group meets the other ranks: rank, world size and store from the
// init method (env://, tcp://host:port or tcp://[IPv6 address]:port, file:///path) or the
// options.
//
// env:// reads RANK and WORLD_SIZE, else OpenMPI's OMPI_COMM_WORLD_RANK and
// OMPI_COMM_WORLD_SIZE (a program started by mpirun, which then also gets LOCAL_RANK and
// LOCAL_WORLD_SIZE from OpenMPI's local variables); MASTER_ADDR (default 127.0.0.1; a host
// name, an IPv4 or an IPv6 address such as ::1) and MASTER_PORT. Rank 0 serves the TCPStore
// unless the launcher serves it: torchrun's agent and ember-run say so with
// TORCHELASTIC_USE_AGENT_STORE=True (EMBER_USE_AGENT_STORE=1 too); every rank is then a
// client, and its keys are under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/", as
// PyTorch's workers put theirs, since the launcher's store outlives a restarted group.
#pragma once

#include <memory>
#include <string>

#include "ember/distributed.h"

namespace ember::detail::distributed {

struct Rendezvous {
  int rank = -1;
  int world_size = -1;
  std::shared_ptr<ember::distributed::Store> store;
  /// Put before the process group's keys (a launcher's store is shared by restarts).
  std::string key_prefix;
  std::string store_host;  // who serves a TCPStore ("rank 0", "the launcher"); "" otherwise
};

/// Resolves the init method and connects to (or serves) the store. ValueError for a bad
/// init method, rank or world size; DistributedError when the store cannot be reached.
Rendezvous rendezvous(const ember::distributed::InitOptions& options);

/// Waits until all ranks have joined under `prefix`; DistributedError naming the ranks
/// that did not arrive within the timeout, or at once naming both sizes when a rank was
/// started with another world size than rank 0 (Note [World size at rendezvous]).
void meet(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
          std::chrono::milliseconds timeout);

}  // namespace ember::detail::distributed
