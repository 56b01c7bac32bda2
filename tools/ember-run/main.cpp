// ember-run: launches an ember program as N ranks (see options.cpp for the usage).
#include <signal.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

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

  std::unique_ptr<ember::distributed::TCPStoreServer> store;
  int port = options.master_port.value_or(0);
  if (options.node_rank == 0) {
    try {
      store = std::make_unique<ember::distributed::TCPStoreServer>(port);
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
    store = std::make_unique<ember::distributed::TCPStoreServer>(requested);
    return store->port();
  };
  return ember::run::launch(options, port, fresh_store);
}
