// ember beside PyTorch (issue 28, items 7 and 11): ember ranks under torchrun, whose agent
// serves the store in PyTorch's protocol, and PyTorch ranks under ember-run, whose store
// then speaks it (Note [Store dialects]); ember-run's store binds the job's address and
// counts as ranks only the clients that give the job's run id (Note [Ranks prove their job]).
//
// The PyTorch side is Debian's python3-torch (1.13) at /usr/bin/python3; the tests that
// need it are skipped, saying so, when it is absent. torchrun is started through
// tests/distributed/torchrun.py, which says why.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "distributed/socket.h"
#include "distributed/tcp_store_protocol.h"
#include "distributed/tcp_store_server.h"
#include "ember/ember.h"
#include "launch_test_util.h"

namespace dist = ember::distributed;

namespace {

std::string scripts() { return EMBER_TORCH_SCRIPTS_DIR; }

bool have_torch() {
  static const bool found = std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
  return found;
}

#define SKIP_WITHOUT_TORCH() \
  if (!have_torch()) GTEST_SKIP() << "python3-torch is absent: /usr/bin/python3 cannot import torch.distributed"

/// torchrun with `rdzv` options starting two ember ranks that all_reduce (worker's sum_ranks).
Launch ember_under_torchrun(const std::string& rdzv) {
  return run("/usr/bin/python3 " + scripts() + "/torchrun.py --nnodes=1 --nproc_per_node=2 " + rdzv + " --no_python " +
                 EMBER_DIST_WORKER_PATH + " --scenario=sum_ranks",
             std::chrono::seconds(120));
}

/// A port free now (torchrun's static rendezvous passes --master_port on as is: 0 is no port).
int free_port() {
  dist::TCPStoreServer probe(0, {}, "127.0.0.1");
  return probe.port();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Torchrun, EmberRanksJoinTheAgentsStoreWithStaticRendezvous) {
  SKIP_WITHOUT_TORCH();
  // The static rendezvous: the agent serves MASTER_PORT and sets TORCHELASTIC_USE_AGENT_STORE=True.
  Launch launch = ember_under_torchrun("--rdzv_backend=static --master_addr=127.0.0.1 --master_port=" +
                                       std::to_string(free_port()));
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(count(launch.output, " of 2 (local rank "), 2u) << launch.output;
  EXPECT_EQ(count(launch.output, "sum 3"), 2u) << launch.output;
}

// Issue 34, item 16: under the agent's store, which cannot tell exits, a rank killed
// mid-collective is not blamed on a survivor that failed after it (rank 0 said "peer
// rank 2 destroyed the process group" when rank 1 was killed): the survivors say that the
// rank whose failure started it is unknown, and name a peer that failed too as such.
TEST(Torchrun, ARankKilledUnderTheAgentsStoreIsNotBlamedOnASurvivor) {
  SKIP_WITHOUT_TORCH();
  Launch launch = run("/usr/bin/python3 " + scripts() + "/torchrun.py --nnodes=1 --nproc_per_node=3 " +
                          "--rdzv_backend=static --master_addr=127.0.0.1 --master_port=" + std::to_string(free_port()) +
                          " --no_python " + EMBER_DIST_WORKER_PATH + " --scenario=dying_peer",
                      std::chrono::seconds(120));
  EXPECT_NE(launch.status, 0) << launch.output;
  for (int survivor : {0, 2}) {
    std::string line = "rank " + std::to_string(survivor) + ": DistributedError: ";
    auto at = launch.output.find(line);
    ASSERT_NE(at, std::string::npos) << launch.output;
    std::string rest = launch.output.substr(at, launch.output.find('\n', at) - at);
    EXPECT_NE(rest.find("the rank whose failure started this is unknown (this store cannot tell exits"),
              std::string::npos)
        << rest;
    EXPECT_EQ(rest.find("destroyed the process group (finished"), std::string::npos) << rest;
  }
}

// Issue 34, item 16: torchrun's agent reads the error file as UTF-8 text; a message that
// is not UTF-8 made it die of UnicodeDecodeError, losing the report. The file is ASCII
// JSON now (Note [Error file]) and the agent reports the rank's error.
TEST(Torchrun, TheAgentReportsAnErrorWhoseMessageIsNotUtf8) {
  SKIP_WITHOUT_TORCH();
  Launch launch = run("/usr/bin/python3 " + scripts() + "/torchrun.py --nnodes=1 --nproc_per_node=1 " +
                          "--rdzv_backend=static --master_addr=127.0.0.1 --master_port=" + std::to_string(free_port()) +
                          " --no_python " + EMBER_RUN_PROBE_PATH + " throw-bytes",
                      std::chrono::seconds(120));
  EXPECT_NE(launch.status, 0) << launch.output;
  EXPECT_EQ(launch.output.find("UnicodeDecodeError"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("Root Cause"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("ValueError: probe: f\u00fcr caf\u00e9 \u20ac"), std::string::npos) << launch.output;
}

TEST(Torchrun, EmberRanksMeetWithC10dRendezvous) {
  SKIP_WITHOUT_TORCH();
  Launch launch = ember_under_torchrun("--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:0 --rdzv_id=ember-c10d");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(count(launch.output, "sum 3"), 2u) << launch.output;
}

TEST(EmberRun, PyTorchRanksJoinItsStoreAndAllReduce) {
  SKIP_WITHOUT_TORCH();
  Launch launch = run(std::string(EMBER_RUN_PATH) + " --nproc-per-node=2 --term-timeout=10 /usr/bin/python3 " +
                          scripts() + "/torch_all_reduce.py",
                      std::chrono::seconds(120));
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(count(launch.output, "all_reduce ok"), 2u) << launch.output;
  // Both ranks got the same run id, the one ember-run generated.
  auto at = launch.output.find("run_id=");
  ASSERT_NE(at, std::string::npos) << launch.output;
  std::string id = launch.output.substr(at, std::string("run_id=").size() + 36);  // a uuid
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef-", 7), std::string::npos) << id;
  EXPECT_EQ(count(launch.output, id), 2u) << launch.output;
}

TEST(EmberRun, AOneNodeJobsStoreListensOnLoopbackAlone) {
  SKIP_WITHOUT_TORCH();  // the probe is a Python script
  Launch launch = run(std::string(EMBER_RUN_PATH) + " --nproc-per-node=1 /usr/bin/python3 " + scripts() +
                      "/store_listen_address.py");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(launch.output, "listening on 127.0.0.1\n");
}

TEST(TCPStoreRunId, AClientWithoutTheJobsRunIdIsNeverCountedAsARank) {
  dist::TCPStoreServer server(0, {}, "127.0.0.1", "the-run-id");
  auto timeout = std::chrono::milliseconds(10000);
  ::setenv("TORCHELASTIC_RUN_ID", "another-job", 1);
  {
    dist::TCPStore impostor("127.0.0.1", server.port(), std::nullopt, false, timeout);
    try {
      impostor.register_rank(1);
      ADD_FAILURE() << "a REGISTER without the run id was accepted";
    } catch (const ember::DistributedError& e) {
      EXPECT_STREQ(e.what(),
                   "TCPStore: REGISTER refused: the client did not give this job's run id (TORCHELASTIC_RUN_ID)");
    }
    ::unsetenv("TORCHELASTIC_RUN_ID");
    dist::TCPStore anonymous("127.0.0.1", server.port(), std::nullopt, false, timeout);
    EXPECT_THROW(anonymous.register_rank(2), ember::DistributedError);
  }  // both close without leaving
  ::setenv("TORCHELASTIC_RUN_ID", "the-run-id", 1);
  dist::TCPStore honest("127.0.0.1", server.port(), std::nullopt, false, timeout);
  honest.register_rank(0);
  EXPECT_EQ(honest.num_keys(), 0);  // a round trip: the server has seen the closes
  EXPECT_EQ(honest.departed_ranks(std::chrono::milliseconds(0)), std::vector<int>{});
  {
    dist::TCPStore rank3("127.0.0.1", server.port(), std::nullopt, false, timeout);
    rank3.register_rank(3);
  }  // a rank of the job that closes without leaving has departed
  EXPECT_EQ(honest.departed_ranks(timeout), std::vector<int>{3});
  ::unsetenv("TORCHELASTIC_RUN_ID");
}

TEST(TCPStoreInterop, APyTorchClientUsesEmbersStore) {
  SKIP_WITHOUT_TORCH();
  dist::TCPStoreServer server(0, {}, "127.0.0.1");
  dist::TCPStore ember_client("127.0.0.1", server.port(), std::nullopt, false, std::chrono::seconds(30));
  ember_client.set("/from_ember", "hello");  // PyTorch's client puts "/" before its keys
  Launch launch = run("/usr/bin/python3 " + scripts() + "/torch_store_ops.py client " + std::to_string(server.port()),
                      std::chrono::seconds(120));
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(launch.output, "torch client ok\n");
  EXPECT_EQ(ember_client.get("/k"), "w");  // PyTorch's compare_set
}

TEST(TCPStoreInterop, AnEmberClientUsesPyTorchsStore) {
  SKIP_WITHOUT_TORCH();
  int port = free_port();
  Launch launch;
  std::thread torch_server([&] {
    launch = run("/usr/bin/python3 " + scripts() + "/torch_store_ops.py server " + std::to_string(port),
                 std::chrono::seconds(120));
  });
  auto timeout = std::chrono::seconds(60);
  try {
    dist::TCPStore store("127.0.0.1", port, std::nullopt, false, timeout);  // retries until PyTorch's is up
    EXPECT_FALSE(store.tracks_departures());  // PyTorch's store keeps no record of departures
    store.set("/ember_key", "ember value");
    EXPECT_EQ(store.get("/ember_key"), "ember value");
    EXPECT_EQ(store.add("/counter", 10), 10);
    EXPECT_EQ(store.add("/counter", 2), 12);
    EXPECT_TRUE(store.check({"/ember_key", "/counter"}));
    EXPECT_FALSE(store.check({"/missing"}));
    store.set("/gone", "x");
    EXPECT_TRUE(store.delete_key("/gone"));
    EXPECT_FALSE(store.delete_key("/gone"));
    try {
      store.wait({"/never"}, std::chrono::milliseconds(300));
      ADD_FAILURE() << "wait returned";
    } catch (const ember::DistributedError& e) {
      EXPECT_STREQ(e.what(), "wait timeout after 300ms, keys: /never");
    }
    // The timed-out connection is replaced: the next call is answered correctly.
    EXPECT_EQ(store.add("/counter", 0), 12);
    store.register_rank(0);  // not sent to a PyTorch store
    EXPECT_EQ(store.departed_ranks(std::chrono::milliseconds(0)), std::vector<int>{});
    store.set("/done", "1");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  torch_server.join();
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(launch.output, "torch server ok\n");
}

// No PyTorch 2.x is installed here, so a scripted server plays one, as PyTorch 2.x's
// TCPStoreBackend behaves: a connection whose first query is not VALIDATE with the magic
// number is closed; after it, queries are numbered from VALIDATE = 0.
TEST(TCPStoreInterop, AnEmberClientSpeaksPyTorch2xToA2xServer) {
  namespace net = ember::detail::net;
  namespace proto = ember::detail::store_protocol;
  net::Socket listener = net::listen_on("127.0.0.1", 0);
  int port = net::local_port(listener);
  std::vector<std::string> first_bytes;  // each connection's first query byte
  std::string set_request;
  std::thread server([&] {
    auto deadline = net::Clock::now() + std::chrono::seconds(30);
    for (;;) {
      net::Socket c(::accept(listener.fd(), nullptr, nullptr));
      if (!c.valid()) return;
      uint8_t query = 0;
      if (!net::recv_all(c.fd(), &query, 1, deadline)) return;
      first_bytes.push_back(std::to_string(query));
      if (query != proto::torch2::kValidate) continue;  // closed, as 2.x closes it
      uint32_t magic = 0;
      if (!net::recv_all(c.fd(), &magic, 4, deadline) || magic != proto::kTorchValidationMagic) return;
      // The probe's GETNUMKEYS, then a SET and a GET of "k".
      if (!net::recv_all(c.fd(), &query, 1, deadline) || query != proto::torch2::kNumKeys) return;
      int64_t zero = 0;
      net::send_all(c.fd(), &zero, sizeof(zero));
      std::string expected_set;
      proto::put_u8(expected_set, proto::torch2::kSet);
      proto::put_torch_string(expected_set, "k");
      proto::put_torch_string(expected_set, "v");
      set_request.resize(expected_set.size());
      if (!net::recv_all(c.fd(), set_request.data(), set_request.size(), deadline)) return;
      EXPECT_EQ(set_request, expected_set);
      std::string expected_wait;  // get() waits for the key first
      proto::put_u8(expected_wait, proto::torch2::kWait);
      proto::put_u64(expected_wait, 1);
      proto::put_torch_string(expected_wait, "k");
      std::string wait(expected_wait.size(), '\0');
      if (!net::recv_all(c.fd(), wait.data(), wait.size(), deadline)) return;
      EXPECT_EQ(wait, expected_wait);
      uint8_t stop_waiting = 0;
      net::send_all(c.fd(), &stop_waiting, 1);
      std::string expected_get;
      proto::put_u8(expected_get, proto::torch2::kGet);
      proto::put_torch_string(expected_get, "k");
      std::string get(expected_get.size(), '\0');
      if (!net::recv_all(c.fd(), get.data(), get.size(), deadline)) return;
      EXPECT_EQ(get, expected_get);
      std::string value;
      proto::put_torch_string(value, "v");
      net::send_all(c.fd(), value.data(), value.size());
      return;
    }
  });
  try {
    dist::TCPStore store("127.0.0.1", port, std::nullopt, false, std::chrono::seconds(30));
    store.set("k", "v");
    EXPECT_EQ(store.get("k"), "v");
    EXPECT_FALSE(store.tracks_departures());
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  server.join();
  // ember's NUM_KEYS, then 1.13's GETNUMKEYS, then 2.x's VALIDATE (Note [Which store the client talks to]).
  EXPECT_EQ(first_bytes, (std::vector<std::string>{std::to_string(static_cast<int>(proto::Command::NumKeys)),
                                                   std::to_string(proto::torch1::kNumKeys), "0"}));
}

TEST(TCPStoreInterop, APyTorchClientOverTheLimitsIsClosedWithoutAReplyWhileOthersWork) {
  namespace net = ember::detail::net;
  namespace proto = ember::detail::store_protocol;
  dist::TCPStoreServer server(0, {}, "127.0.0.1");
  dist::TCPStore honest("127.0.0.1", server.port(), std::nullopt, false, std::chrono::seconds(10));
  // A 1.13 GET announcing a 1 TiB key: refused once its length is read, and, PyTorch's
  // protocol having no error reply, closed without one.
  net::Socket hostile = net::connect_to("127.0.0.1", server.port(), net::Clock::now() + std::chrono::seconds(10));
  std::string get;
  proto::put_u8(get, proto::torch1::kGet);
  proto::put_u64(get, uint64_t{1} << 40);
  ASSERT_TRUE(net::send_all(hostile.fd(), get.data(), get.size()));
  char byte = 0;
  EXPECT_FALSE(net::recv_all(hostile.fd(), &byte, 1, net::Clock::now() + std::chrono::seconds(10)));  // EOF
  honest.set("k", "v");
  EXPECT_EQ(honest.get("k"), "v");
  EXPECT_EQ(honest.num_keys(), 1);
}

// Issue 34, item 15: PyTorch's server reads a counter with std::stoll and adds with int64
// arithmetic that wraps; ember's answers a PyTorch client alike instead of closing its
// connection. Only a value stoll refuses closes it, as PyTorch's server's does (its
// protocol has no error reply). The same through PyTorch's own client: torch_store_ops.py.
TEST(TCPStoreInterop, APyTorchAddReadsTheCounterAsStollDoes) {
  namespace net = ember::detail::net;
  namespace proto = ember::detail::store_protocol;
  dist::TCPStoreServer server(0, {}, "127.0.0.1");
  dist::TCPStore ember_client("127.0.0.1", server.port(), std::nullopt, false, std::chrono::seconds(10));
  net::Socket torch = net::connect_to("127.0.0.1", server.port(), net::Clock::now() + std::chrono::seconds(10));
  auto add = [&](const std::string& key, int64_t amount, int64_t* result) {
    std::string request;
    proto::put_u8(request, proto::torch1::kAdd);
    proto::put_torch_string(request, key);
    proto::put_i64(request, amount);
    try {
      return net::send_all(torch.fd(), request.data(), request.size()) &&
             net::recv_all(torch.fd(), result, sizeof(*result), net::Clock::now() + std::chrono::seconds(10));
    } catch (const ember::DistributedError&) {
      return false;  // a reset
    }
  };
  const int64_t max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
  struct Case {
    std::string stored;
    int64_t amount, want;
  } cases[] = {{" 12", 5, 17},
               {"\t\n+5", 1, 6},
               {"12abc", 1, 13},
               {"0x10", 1, 1},
               {"-0012", 2, -10},
               {std::to_string(max), 1, min},
               {std::to_string(min), -1, max}};
  for (const auto& c : cases) {
    ember_client.set("counter", c.stored);
    int64_t result = 0;
    ASSERT_TRUE(add("counter", c.amount, &result)) << "the connection closed on " << c.stored;
    EXPECT_EQ(result, c.want) << c.stored;
    EXPECT_EQ(ember_client.get("counter"), std::to_string(c.want)) << c.stored;
  }
  // ember's own dialect reads the counter alike; it has an error reply for a sum past int64.
  ember_client.set("counter", " 12abc");
  EXPECT_EQ(ember_client.add("counter", 1), 13);
  // What stoll refuses (no digits, past int64) closes the connection, the value intact.
  for (std::string refused : {"abc", "", "-", "9223372036854775808"}) {
    net::Socket other = net::connect_to("127.0.0.1", server.port(), net::Clock::now() + std::chrono::seconds(10));
    std::swap(torch, other);
    ember_client.set("counter", refused);
    int64_t result = 0;
    EXPECT_FALSE(add("counter", 1, &result)) << refused;
    EXPECT_EQ(ember_client.get("counter"), refused);
  }
}
