// ember-run: launches an ember program as N ranks (see options.cpp for the usage).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "distributed/tcp_store_server.h"
#include "launcher.h"
#include "options.h"

namespace {

/// The job's run id: TORCHELASTIC_RUN_ID when set (every node of a multi-node job must be
/// given the same), else a random one for a one-node job. The ranks get it, and the store
/// counts as a rank only a client that gives it (Note [Ranks prove their job]). A
/// multi-node job without one has no such check.
std::string job_run_id(const ember::run::Options& options) {
  if (const char* id = std::getenv("TORCHELASTIC_RUN_ID"); id && *id) return id;
  if (options.nnodes > 1) return "";
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof(part), "%08x", static_cast<unsigned>(random()));
    id += part;
  }
  return id;
}

}  // namespace

int main(int argc, char** argv) {
  ember::run::Options options;
  try {
    options = ember::run::parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (*e.what()) std::fprintf(stderr, "ember-run: %s\n", e.what());
    std::fputs(ember::run::usage(), *e.what() ? stderr : stdout);
    return *e.what() ? 2 : 0;
  }
  // Block the signals the launcher waits for before any thread starts, so that every
  // thread (the store server's too) inherits the mask and they reach sigtimedwait.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // What torchrun tells its workers about the store its agent serves, so that PyTorch
  // ranks (and ember's) join this one rather than serve their own.
  std::string run_id = job_run_id(options);
  if (!run_id.empty()) ::setenv("TORCHELASTIC_RUN_ID", run_id.c_str(), 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "0", 0);
  std::unique_ptr<ember::distributed::TCPStoreServer> store;
  int port = options.master_port.value_or(0);
  if (options.node_rank == 0) {
    try {
      // The job's address alone (loopback for a one-node job on 127.0.0.1), not every interface.
      store = std::make_unique<ember::distributed::TCPStoreServer>(port, ember::detail::store_protocol::Limits{},
                                                                   options.master_addr, run_id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ember-run: cannot serve the store: %s\n", e.what());
      return 1;
    }
    port = store->port();
  }
  return ember::run::launch(options, port);
}
