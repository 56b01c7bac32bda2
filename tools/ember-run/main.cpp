// ember-run: launches an ember program as N ranks (see options.cpp for the usage).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "distributed/tcp_store_server.h"
#include "launcher.h"
#include "options.h"

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

  // The job's run id (TORCHELASTIC_RUN_ID, --rdzv-id): the store counts as a rank only a
  // client that gives it (Note [Ranks prove their job]), so a one-node job left with
  // torchrun's default "none" gets a random one. Every node of a multi-node job must be
  // given the same --rdzv-id, which is then the secret.
  if (options.rdzv_id == "none" && options.nnodes == 1) options.rdzv_id = ember::run::random_run_id();
  const std::string run_id = options.rdzv_id;
  // What torchrun tells its workers about the store its agent serves, so that PyTorch
  // ranks (and ember's) join this one rather than serve their own.
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  // The job's address alone (loopback for a one-node job on 127.0.0.1), not every interface.
  auto serve = [&](int requested) {
    return std::make_unique<ember::distributed::TCPStoreServer>(requested, ember::detail::store_protocol::Limits{},
                                                                options.master_addr, run_id);
  };
  std::unique_ptr<ember::distributed::TCPStoreServer> store;
  int port = options.master_port.value_or(0);
  if (options.node_rank == 0) {
    try {
      store = serve(port);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ember-run: cannot serve the store: %s\n", e.what());
      return 1;
    }
    port = store->port();
  }
  // Each restart of the worker group rendezvouses in an empty store (Note [Restarting the worker group]).
  auto fresh_store = [&]() -> int {
    if (!store) return port;
    int requested = options.master_port.value_or(0);
    store.reset();
    store = serve(requested);
    return store->port();
  };
  return ember::run::launch(options, port, fresh_store);
}
