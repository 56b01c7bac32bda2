// Messages that name the cause: a world-size mismatch at rendezvous (Note [World size at
// rendezvous]), what a rank knows of its peers when a collective breaks (Note [Peers in
// transport errors]), a stale file store, and integers that do not fit. In-process where
// the rendezvous alone shows it; otherwise 2 ranks launched through ember-run running
// tests/distributed/messages_worker.cpp, every launch under a deadline.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "distributed/peer_report.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "ember/ember.h"
#include "launch_test_util.h"
#include "test_support.h"

namespace dist = ember::distributed;
using namespace std::chrono_literals;

namespace {

using ember::testing::error_of;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string launch(const std::string& scenario, const std::string& wrapper = "") {
  std::string worker = std::string(EMBER_MESSAGES_WORKER_PATH) + " --scenario=" + scenario;
  std::string program = wrapper.empty() ? worker : "/bin/sh -c '" + wrapper + " exec " + worker + "'";
  return std::string(EMBER_RUN_PATH) + " --nproc-per-node=2 --term-timeout=10 " + program;
}

/// The line `rank R: ...` the worker printed for rank `r`.
std::string line_of(const Launch& launch, int r) {
  std::string start = "rank " + std::to_string(r) + ": ";
  auto at = launch.output.find(start);
  if (at == std::string::npos) return "<no line for rank " + std::to_string(r) + ">";
  return launch.output.substr(at, launch.output.find('\n', at) - at);
}

// ---- world size ---------------------------------------------------------------------------

TEST(WorldSizeMismatch, BothRanksFailAtRendezvousNamingBothSizes) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, std::nullopt, true, 20s);
  std::string rank0, rank1;
  std::thread other([&] {
    dist::TCPStore client("127.0.0.1", store->port(), std::nullopt, false, 20s);
    rank1 = error_of<ember::DistributedError>([&] { ember::detail::distributed::meet(client, "p/", 1, 3, 20s); });
  });
  rank0 = error_of<ember::DistributedError>([&] { ember::detail::distributed::meet(*store, "p/", 0, 2, 20s); });
  other.join();
  const std::string where = " (in the store at 127.0.0.1:" + std::to_string(store->port()) + ")";
  EXPECT_EQ(rank1,
            "init_process_group: world_size mismatch: rank 1 was started with world_size=3 and rank 0 with "
            "world_size=2" +
                where + "; every rank must be started with the same world size");
  EXPECT_EQ(rank0,
            "init_process_group: world_size mismatch: rank 0 was started with world_size=2 and rank 1 with "
            "world_size=3" +
                where + "; every rank must be started with the same world size");
}

TEST(WorldSizeMismatch, UnderEmberRunNoRankWaitsForTheTimeout) {
  // Rank 1 is started with WORLD_SIZE=3: without the check it waited 30 s for a rank 2, and
  // rank 0 failed in Gloo's rendezvous naming an internal key.
  Launch run_ = run(launch("init", "if [ \"$RANK\" = 1 ]; then export WORLD_SIZE=3; fi;"), 60s);
  EXPECT_EQ(run_.status, 3) << run_.output;
  EXPECT_TRUE(contains(line_of(run_, 0), "rank 0 was started with world_size=2 and rank 1 with world_size=3"))
      << run_.output;
  EXPECT_TRUE(contains(line_of(run_, 1), "rank 1 was started with world_size=3 and rank 0 with world_size=2"))
      << run_.output;
}

// ---- a stale file store ---------------------------------------------------------------------

TEST(StaleFileStore, IsNamedAsAFileNotAMasterAddress) {
  auto path = std::filesystem::temp_directory_path() / ("ember_stale_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    // What a crashed job of one rank leaves behind.
    dist::FileStore earlier(path.string(), -1, 5s);
    ember::detail::distributed::meet(earlier, "default_pg/0/", 0, 1, 5s);
  }
  dist::FileStore store(path.string(), 1, 5s);
  EXPECT_EQ(
      error_of<ember::DistributedError>([&] { ember::detail::distributed::meet(store, "default_pg/0/", 0, 1, 5s); }),
      "init_process_group: more than world_size=1 processes joined the file " + path.string() +
          " (rank 0 arrived as number 2); is the file left from an earlier job (remove it), or shared by two jobs?");
  std::filesystem::remove(path);
}

// ---- integers that do not fit -----------------------------------------------------------------

TEST(IntegersThatDoNotFit, RankWorldSizeAndMasterPortFromTheEnvironment) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_PORT"}) {
    const char* before = std::getenv(name);
    std::string saved = before;
    // 2^32 (+ 29500 for the port) wrapped to 0 (or 29500) before.
    ::setenv(name, std::string(name) == "MASTER_PORT" ? "4294996796" : "4294967296", 1);
    std::string message = error_of<ember::ValueError>([] { dist::init_process_group("gloo"); });
    EXPECT_EQ(message, std::string("init_process_group: ") + name +
                           " must be an integer from -2147483648 to 2147483647, got '" + std::getenv(name) + "'");
    ::setenv(name, saved.c_str(), 1);
  }
  EXPECT_EQ(error_of<ember::ValueError>([] {
              dist::init_process_group(
                  "gloo", dist::InitOptions().init_method("tcp://127.0.0.1:4294996796").rank(0).world_size(1));
            }),
            "init_process_group: the port must be an integer from -2147483648 to 2147483647, got '4294996796'");
  EXPECT_FALSE(dist::is_initialized());
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(name);
}

TEST(IntegersThatDoNotFit, EmberRunOptions) {
  // 4294967298 = 2^32 + 2 started 2 ranks before.
  Launch nproc = run(std::string(EMBER_RUN_PATH) + " --nproc-per-node=4294967298 /bin/true", 20s);
  EXPECT_EQ(nproc.status, 2) << nproc.output;
  EXPECT_TRUE(contains(nproc.output, "ember-run: --nproc-per-node=4294967298 is out of range (at most 2147483647)"))
      << nproc.output;
  Launch port = run(std::string(EMBER_RUN_PATH) + " --master-port 4294996796 /bin/true", 20s);
  EXPECT_EQ(port.status, 2) << port.output;
  EXPECT_TRUE(contains(port.output, "ember-run: --master-port=4294996796 is out of range")) << port.output;
}

// ---- peers in transport errors ----------------------------------------------------------------

TEST(PeersInTransportErrors, APeerThatDestroyedItsGroupIsNamed) {
  Launch run_ = run(launch("peer_destroyed_its_group"), 60s);
  std::string line = line_of(run_, 0);
  EXPECT_TRUE(contains(line,
                       "all_reduce (collective #1) failed on rank 0: peer rank 1 destroyed the process group "
                       "(finished, or stopped calling collectives); "))
      << run_.output;
  EXPECT_FALSE(contains(line, "no peer")) << line;
}

TEST(PeersInTransportErrors, ALatePeerIsNotSaidToHaveExited) {
  // Timeout 3 s; rank 1 joins only after rank 0 reported.
  Launch run_ = run(launch("late_peer"), 60s);
  EXPECT_TRUE(contains(line_of(run_, 0),
                       "failed on rank 0: no peer is known to have exited or destroyed the process "
                       "group: a peer may be stuck, slower than the timeout (3000ms) or not calling "
                       "this collective; "))
      << run_.output;
}

TEST(PeersInTransportErrors, ARankKilledBeforeTheFirstCollectiveIsNamed) {
  Launch run_ = run(launch("killed_before_first_collective"), 60s);
  EXPECT_TRUE(contains(line_of(run_, 0), "failed on rank 0: peer rank 1 exited; ")) << run_.output;
}

TEST(PeersInTransportErrors, APeerThatDiesBeforeGlooConnectsIsNamedNotAStoreKey) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, 2, true, 20s);
  {
    // Rank 1 met the others (registered with the store), then died before connecting Gloo.
    dist::TCPStore rank1("127.0.0.1", store->port(), 2, false, 20s);
    rank1.register_rank(1);
  }
  ember::detail::distributed::GroupSetup setup;
  setup.store = store;
  setup.local_address = store->local_address();
  setup.prefix = "p/";
  setup.rank = 0;
  setup.world_size = 2;
  setup.timeout = 1s;  // Gloo's rendezvous waits this long for rank 1's address
  setup.store_host = "rank 0";
  std::string message = error_of<ember::DistributedError>([&] { ember::detail::distributed::make_gloo_group(setup); });
  EXPECT_TRUE(contains(message, "init_process_group: Gloo could not connect rank 0 to its peers: peer rank 1 exited; "))
      << message;
}

TEST(PeersInTransportErrors, TheStoreHostIsNamedWhenRankZeroServedIt) {
  // Rank 0 serves the store (no launcher's store) on a port the kernel found free, and dies after init.
  int port = 0;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
    ::close(fd);
  }
  Launch run_ =
      run(launch("killed_before_first_collective --victim=0 --init-method=tcp://127.0.0.1:" + std::to_string(port),
                 "unset EMBER_USE_AGENT_STORE TORCHELASTIC_USE_AGENT_STORE;"),
          60s);
  EXPECT_TRUE(contains(line_of(run_, 1), "failed on rank 1: rank 0 exited (the store it served cannot be reached); "))
      << run_.output;
}

}  // namespace

// Issue 34, item 16: a peer whose group had failed before it destroyed it (a rank that got
// the error too and exited) is no cause, and is never named as one: rank 0 said "peer
// rank 2 destroyed the process group" when rank 1 was killed under torchrun's store.
TEST(PeersInTransportErrors, APeerThatFailedTooIsNotBlamed) {
  namespace detail_dist = ember::detail::distributed;
  const auto timeout = std::chrono::milliseconds(100);
  // A store that cannot tell exits: the cause is unknown, and rank 2 is named as what it is.
  auto dir = std::filesystem::temp_directory_path() / ("ember_peer_blame_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ember::distributed::FileStore store((dir / "store").string(), 3);
    detail_dist::mark_left(store, "g/", 2, /*after_failure=*/true);
    EXPECT_EQ(detail_dist::describe_peers(store, "g/", 0, 3, timeout, "", /*timed_out=*/false),
              "the rank whose failure started this is unknown (this store cannot tell exits, and no peer is known to "
              "have destroyed the process group); peer rank 2 failed too and destroyed the process group; ");
    detail_dist::mark_left(store, "g/", 1, /*after_failure=*/false);  // a peer that left first is a cause
    EXPECT_EQ(detail_dist::describe_peers(store, "g/", 0, 3, timeout, "", false),
              "peer rank 1 destroyed the process group (finished, or stopped calling collectives); peer rank 2 failed "
              "too and destroyed the process group; ");
  }
  std::filesystem::remove_all(dir);
  // ember's store tells exits: the rank that died is named, the one that failed after it is not blamed.
  ember::distributed::TCPStore store("127.0.0.1", 0, std::nullopt, true, std::chrono::seconds(10));
  {
    ember::distributed::TCPStore rank1("127.0.0.1", store.port(), std::nullopt, false, std::chrono::seconds(10));
    rank1.register_rank(1);
  }  // closed without leaving: it exited
  detail_dist::mark_left(store, "g/", 2, /*after_failure=*/true);
  EXPECT_EQ(detail_dist::describe_peers(store, "g/", 0, 3, std::chrono::seconds(10), "", false),
            "peer rank 1 exited; peer rank 2 failed too and destroyed the process group; ");
}
