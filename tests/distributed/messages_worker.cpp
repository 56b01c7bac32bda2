// The program each rank runs in test_distributed_messages.cpp's launches: one scenario
// per run (--scenario=NAME), each printing the error a rank gets as
//   rank R: <ErrorType>: <message>
// so that the test can check what the message says about the other ranks.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ember/ember.h"

namespace dist = ember::distributed;

namespace {

int report(const char* type, const std::exception& e) {
  const char* rank = std::getenv("RANK");
  std::fprintf(stderr, "rank %s: %s: %s\n", rank ? rank : "?", type, e.what());
  std::fflush(stderr);
  return 3;
}

/// Runs `body`, reporting the error it throws (exit code 3); 0 when none.
template <typename Body>
int reported(Body&& body) {
  try {
    body();
    return 0;
  } catch (const ember::DistributedError& e) {
    return report("DistributedError", e);
  } catch (const ember::ValueError& e) {
    return report("ValueError", e);
  }
}

/// A store client of the launcher's store, for a rank to wait on another's progress.
dist::TCPStore launcher_store() {
  return dist::TCPStore(std::getenv("MASTER_ADDR"), std::atoi(std::getenv("MASTER_PORT")), std::nullopt, false,
                        std::chrono::seconds(60));
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario, init_method;
  int victim = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--scenario=", 11) == 0) scenario = argv[i] + 11;
    if (std::strncmp(argv[i], "--init-method=", 14) == 0) init_method = argv[i] + 14;
    if (std::strncmp(argv[i], "--victim=", 9) == 0) victim = std::atoi(argv[i] + 9);
  }
  // The survivors report rather than die of ember-run's SIGTERM when a peer fails.
  signal(SIGTERM, SIG_IGN);
  auto timeout = scenario == "late_peer" ? std::chrono::seconds(3) : std::chrono::seconds(30);
  dist::InitOptions options;
  options.timeout(timeout);
  if (!init_method.empty()) {
    // tcp://host:port: rank 0 serves the store; rank and world size from the launcher.
    options.init_method(init_method)
        .rank(std::atoi(std::getenv("RANK")))
        .world_size(std::atoi(std::getenv("WORLD_SIZE")));
  }
  int status = reported([&] { dist::init_process_group("gloo", options); });
  if (status != 0 || scenario == "init") return status;
  const int rank = dist::get_rank();
  ember::Tensor t = ember::ones({4});
  // Every rank has finished init before a scenario's failure (so that it is not an init
  // failure): told through the launcher's store, which serves MASTER_PORT whatever the
  // init method, not through a collective.
  auto store = launcher_store();
  store.set("initialized/" + std::to_string(rank), "");
  for (int r = 0; r < dist::get_world_size(); ++r) store.wait({"initialized/" + std::to_string(r)});
  if (scenario == "killed_before_first_collective") {
    // The victim (--victim, rank 1 by default) dies; the others' first collective fails.
    if (rank == victim) ::kill(::getpid(), SIGKILL);
    return reported([&] { dist::all_reduce(t); });
  }
  if (scenario == "peer_destroyed_its_group") {
    // Rank 1 is done and destroys its group (it then waits, alive); rank 0 calls one more collective.
    if (rank == 1) {
      dist::destroy_process_group();
      store.wait({"rank 0 reported"});
      return 0;
    }
    status = reported([&] { dist::all_reduce(t); });
    store.set("rank 0 reported", "");
    return status;
  }
  if (scenario == "late_peer") {
    // Rank 1 is alive but late: it joins the collective only after rank 0 timed out.
    if (rank == 1) {
      store.wait({"rank 0 reported"});
      return 0;
    }
    status = reported([&] { dist::all_reduce(t); });
    store.set("rank 0 reported", "");
    return status;
  }
  std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
  return 1;
}
