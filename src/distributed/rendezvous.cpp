#include "distributed/rendezvous.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "distributed/socket.h"
#include "ember/errors.h"

namespace ember::detail::distributed {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// An int, whole and in range: "4294967296" is refused rather than wrapped to 0.
int parse_int(const std::string& text, const char* what) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  EMBER_CHECK(!text.empty() && end && *end == '\0', ValueError, "init_process_group: ", what,
              " must be an integer, got '", text, "'");
  EMBER_CHECK(errno != ERANGE && value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max(),
              ValueError, "init_process_group: ", what, " must be an integer from ", std::numeric_limits<int>::min(),
              " to ", std::numeric_limits<int>::max(), ", got '", text, "'");
  return static_cast<int>(value);
}

/// RANK, else OpenMPI's variable; -1 when neither is set.
int env_int(const char* torch_name, const char* mpi_name) {
  if (const char* v = env(torch_name)) return parse_int(v, torch_name);
  if (const char* v = env(mpi_name)) return parse_int(v, mpi_name);
  return -1;
}

[[noreturn]] void missing_env(const char* name) {
  fail<ValueError>("Error initializing torch.distributed using env:// rendezvous: environment variable ", name,
                   " expected, but not set");
}

/// The launcher (torchrun's agent, ember-run) serves the store: PyTorch's test is the
/// string "True".
bool agent_store() {
  return (env("TORCHELASTIC_USE_AGENT_STORE") && std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True") ||
         (env("EMBER_USE_AGENT_STORE") && std::string(env("EMBER_USE_AGENT_STORE")) == "1");
}

std::shared_ptr<ember::distributed::Store> tcp_store(const std::string& host, int port, int rank, int world_size,
                                                     std::chrono::milliseconds timeout) {
  bool launcher_serves = agent_store();
  auto store =
      std::make_shared<ember::distributed::TCPStore>(host, port, world_size, rank == 0 && !launcher_serves, timeout);
  store->register_rank(rank);
  return store;
}

struct HostPort {
  std::string host;
  int port;
};

/// The host and port of tcp://host:port, where an IPv6 host is in brackets as in every
/// URL (tcp://[::1]:29500, tcp://[fe80::1%eth0]:29500). ValueError for anything else.
HostPort parse_tcp_url(const std::string& method) {
  std::string address = method.substr(6);
  std::string host, rest;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    EMBER_CHECK(close != std::string::npos, ValueError, "init_process_group: invalid IPv6 URL in init_method '", method,
                "': '[' without ']' (expected tcp://[IPv6 address]:port)");
    host = address.substr(1, close - 1);
    rest = address.substr(close + 1);
    in6_addr parsed{};
    EMBER_CHECK(::inet_pton(AF_INET6, host.substr(0, host.find('%')).c_str(), &parsed) == 1, ValueError,
                "init_process_group: '", host, "' in brackets in init_method '", method, "' is not an IPv6 address");
  } else {
    EMBER_CHECK(address.find(']') == std::string::npos, ValueError,
                "init_process_group: invalid IPv6 URL in init_method '", method,
                "': ']' without '[' (expected tcp://[IPv6 address]:port)");
    auto colon = address.rfind(':');
    host = colon == std::string::npos ? address : address.substr(0, colon);
    rest = colon == std::string::npos ? "" : address.substr(colon);
    EMBER_CHECK(host.find(':') == std::string::npos, ValueError,
                "init_process_group: the IPv6 address in init_method '", method, "' must be in brackets: tcp://[", host,
                "]:port");
  }
  EMBER_CHECK(!host.empty() && rest.size() > 1 && rest.front() == ':', ValueError, "init_process_group: init_method '",
              method, "' must be tcp://host:port");
  return {host, parse_int(rest.substr(1), "the port")};
}

}  // namespace

Rendezvous rendezvous(const ember::distributed::InitOptions& options) {
  Rendezvous r;
  r.rank = options.rank();
  r.world_size = options.world_size();
  const std::string& method = options.init_method();
  bool env_method = method == "env://" && !options.store();
  if (env_method) {
    if (!env("RANK") && env("OMPI_COMM_WORLD_RANK")) {
      // Started by mpirun: give the program torchrun's local variables too (without
      // overriding ones the user set), so that code choosing its device from LOCAL_RANK
      // runs unchanged.
      if (const char* local = env("OMPI_COMM_WORLD_LOCAL_RANK")) ::setenv("LOCAL_RANK", local, 0);
      if (const char* local = env("OMPI_COMM_WORLD_LOCAL_SIZE")) ::setenv("LOCAL_WORLD_SIZE", local, 0);
    }
    if (r.rank < 0) r.rank = env_int("RANK", "OMPI_COMM_WORLD_RANK");
    if (r.world_size < 0) r.world_size = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
    if (r.rank < 0 && !env("RANK")) missing_env("RANK");
    if (r.world_size < 0 && !env("WORLD_SIZE")) missing_env("WORLD_SIZE");
  }
  EMBER_CHECK(r.world_size > 0, ValueError, "init_process_group: world_size must be positive, got ", r.world_size);
  EMBER_CHECK(r.rank >= 0 && r.rank < r.world_size, ValueError, "init_process_group: rank ", r.rank,
              " is out of range for world_size ", r.world_size, " (expected 0 <= rank < world_size)");
  auto timeout = options.timeout();
  if (options.store()) {
    r.store = options.store();
  } else if (env_method) {
    std::string host = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
    if (!env("MASTER_PORT")) missing_env("MASTER_PORT");
    r.store = tcp_store(host, parse_int(env("MASTER_PORT"), "MASTER_PORT"), r.rank, r.world_size, timeout);
    r.store_host = agent_store() ? "the launcher" : "rank 0";
    if (agent_store()) {
      r.key_prefix =
          cat("/worker/attempt_", env("TORCHELASTIC_RESTART_COUNT") ? env("TORCHELASTIC_RESTART_COUNT") : "0", "/");
    }
  } else if (method.rfind("tcp://", 0) == 0) {
    auto [host, port] = parse_tcp_url(method);
    r.store = tcp_store(host, port, r.rank, r.world_size, timeout);
    r.store_host = agent_store() ? "the launcher" : "rank 0";
  } else if (method.rfind("file://", 0) == 0) {
    r.store = std::make_shared<ember::distributed::FileStore>(method.substr(7), r.world_size, timeout);
  } else {
    fail<ValueError>("init_process_group: unsupported init_method '", method,
                     "' (expected env://, tcp://host:port or file:///path)");
  }
  return r;
}

namespace {

using Clock = std::chrono::steady_clock;

/// Where the ranks meet, as a message names it.
std::string meeting_place(ember::distributed::Store& store) {
  if (auto* file = dynamic_cast<ember::distributed::FileStore*>(&store)) return cat("the file ", file->path());
  if (auto* tcp = dynamic_cast<ember::distributed::TCPStore*>(&store)) {
    return cat("the store at ", net::host_port(tcp->host(), tcp->port()));
  }
  return "the store";
}

/// What else than this job's ranks can have joined there.
std::string intruders(ember::distributed::Store& store) {
  if (dynamic_cast<ember::distributed::FileStore*>(&store)) {
    return "is the file left from an earlier job (remove it), or shared by two jobs?";
  }
  if (dynamic_cast<ember::distributed::TCPStore*>(&store)) return "do two jobs share the master address and port?";
  return "do two jobs share the store?";
}

/// Waits for the ranks' keys until `deadline`; a DistributedError naming the ranks that
/// did not arrive.
void wait_for_ranks(ember::distributed::Store& store, const std::vector<std::string>& keys,
                    const std::vector<int>& ranks, int rank, int world_size, std::chrono::milliseconds timeout,
                    Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  try {
    store.wait(keys, std::max(left, std::chrono::milliseconds(1)));
  } catch (const DistributedError&) {
    std::string missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!store.check({keys[i]})) missing += (missing.empty() ? "" : ", ") + std::to_string(ranks[i]);
    }
    fail<DistributedError>("init_process_group: timed out after ", timeout.count(), "ms on rank ", rank,
                           " waiting for rank(s) ", missing, " of world_size=", world_size, " to join");
  }
}

}  // namespace

// Note [World size at rendezvous]
// Each rank publishes the world size it was started with under its rank's key. Every rank
// first compares its own with rank 0's (a rank started with another one fails at once,
// whichever sizes are larger), then, once all of its world's ranks have arrived, with
// each of theirs: so the ranks that agree with rank 0 fail too, naming the one that
// differs, instead of meeting in Gloo with different worlds (a timeout naming an internal
// key, or a Gloo assertion).
void meet(ember::distributed::Store& store, const std::string& prefix, int rank, int world_size,
          std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const int64_t arrived = store.add(prefix + "arrived", 1);
  const std::string mine = std::to_string(world_size);
  store.set(prefix + "rank/" + std::to_string(rank), mine);
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < world_size; ++r) {
    keys.push_back(prefix + "rank/" + std::to_string(r));
    ranks.push_back(r);
  }
  auto check_world_size = [&](int other) {
    std::string theirs = store.get(keys[static_cast<size_t>(other)]);
    EMBER_CHECK(theirs == mine, DistributedError, "init_process_group: world_size mismatch: rank ", rank,
                " was started with world_size=", world_size, " and rank ", other, " with world_size=", theirs, " (in ",
                meeting_place(store), "); every rank must be started with the same world size");
  };
  wait_for_ranks(store, {keys[0]}, {0}, rank, world_size, timeout, deadline);
  check_world_size(0);
  wait_for_ranks(store, keys, ranks, rank, world_size, timeout, deadline);
  for (int r = 1; r < world_size; ++r) check_world_size(r);
  EMBER_CHECK(arrived <= world_size, DistributedError, "init_process_group: more than world_size=", world_size,
              " processes joined ", meeting_place(store), " (rank ", rank, " arrived as number ", arrived, "); ",
              intruders(store));
}

}  // namespace ember::detail::distributed
