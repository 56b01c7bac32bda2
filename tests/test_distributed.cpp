// ember::distributed: stores, init errors and single-process groups in this process; the
// collectives, stream ordering and faults on 2 and 3 ranks launched through ember-run (and
// mpirun, and across two network namespaces, over IPv4 and IPv6) running
// tests/distributed/worker.cpp.
//
// Every launch runs under a deadline: a hang kills the launch's process group and fails.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "ipv6_loopback.h"
#include "launch_test_util.h"
#include "test_support.h"

namespace dist = ember::distributed;
using namespace std::chrono_literals;

namespace {

using ember::testing::error_of;

std::string ember_run() { return EMBER_RUN_PATH; }
std::string worker() { return EMBER_DIST_WORKER_PATH; }

/// A port nothing listens on, held bound (not listening) while the object lives, so
/// connections to it are refused and no one else takes it.
class ClosedPort {
 public:
  ClosedPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  int port() const { return port_; }
  void listen() { ::listen(fd_, 1); }

 private:
  int fd_;
  int port_ = 0;
};

/// A port on ::1 nothing listens on, held bound while the object lives.
class ClosedIPv6Port {
 public:
  ClosedIPv6Port() : fd_(::socket(AF_INET6, SOCK_STREAM, 0)) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_loopback;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin6_port);
  }
  ~ClosedIPv6Port() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// ---- TCPStore ----------------------------------------------------------------------------

TEST(TCPStore, SetGetAddCheckDeleteBetweenMasterAndClient) {
  dist::TCPStore master("127.0.0.1", 0, 2, /*is_master=*/true, 5s);
  ASSERT_GT(master.port(), 0);
  dist::TCPStore client("127.0.0.1", master.port(), 2, /*is_master=*/false, 5s);
  master.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
  EXPECT_EQ(client.add("n", 3), 3);
  EXPECT_EQ(master.add("n", -1), 2);
  EXPECT_EQ(master.get("n"), "2");
  EXPECT_TRUE(client.check({"k", "n"}));
  EXPECT_FALSE(client.check({"k", "missing"}));
  EXPECT_EQ(master.num_keys(), 2);
  EXPECT_TRUE(client.delete_key("k"));
  EXPECT_FALSE(client.delete_key("k"));
  EXPECT_FALSE(master.check({"k"}));
  std::string binary("a\0b", 3);
  client.set("bin", binary);
  EXPECT_EQ(master.get("bin"), binary);
}

TEST(TCPStore, WaitReturnsWhenAnotherClientSetsTheKey) {
  dist::TCPStore master("127.0.0.1", 0, 2, true, 5s);
  std::thread setter([&] {
    dist::TCPStore client("127.0.0.1", master.port(), 2, false, 5s);
    client.wait({"go"});  // ordered after the main thread's set
    client.set("ready", "1");
  });
  master.set("go", "1");
  EXPECT_EQ(master.get("ready"), "1");  // get waits for the key
  setter.join();
}

TEST(TCPStore, WaitTimesOutWithTheKeys) {
  dist::TCPStore master("127.0.0.1", 0, 1, true, 5s);
  EXPECT_EQ(error_of<ember::DistributedError>([&] {
              master.wait({"a", "b"}, 50ms);
            }),
            "wait timeout after 50ms, keys: a, b");
  master.set_timeout(50ms);
  EXPECT_EQ(error_of<ember::DistributedError>([&] { master.get("never"); }), "wait timeout after 50ms, keys: never");
}

TEST(TCPStore, UnreachableMasterIsAnErrorWithinTheTimeout) {
  ClosedPort port;
  std::string message =
      error_of<ember::DistributedError>([&] { dist::TCPStore("127.0.0.1", port.port(), 2, false, 200ms); });
  EXPECT_NE(message.find("The client socket has timed out after"), std::string::npos) << message;
  EXPECT_NE(message.find("while trying to connect to (127.0.0.1, " + std::to_string(port.port()) + ")"),
            std::string::npos)
      << message;
}

TEST(TCPStore, PortInUseIsAnError) {
  ClosedPort port;
  port.listen();
  std::string message =
      error_of<ember::DistributedError>([&] { dist::TCPStore("127.0.0.1", port.port(), 1, true, 1s); });
  EXPECT_NE(message.find("The server socket has failed to listen on port " + std::to_string(port.port())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Address already in use"), std::string::npos) << message;
}

TEST(TCPStore, ReportsRanksWhoseConnectionClosedWithoutLeaving) {
  dist::TCPStore master("127.0.0.1", 0, 3, true, 5s);
  {
    dist::TCPStore gone("127.0.0.1", master.port(), 3, false, 5s);
    gone.register_rank(2);
  }
  {
    dist::TCPStore left("127.0.0.1", master.port(), 3, false, 5s);
    left.register_rank(1);
    left.leave();
  }
  EXPECT_EQ(master.departed_ranks(5s), std::vector<int>{2});
}

TEST(TCPStore, SetGetAddWaitBetweenClientsOverTheIPv6Loopback) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  dist::TCPStore master("::1", 0, 2, /*is_master=*/true, 5s);
  ASSERT_GT(master.port(), 0);
  EXPECT_EQ(master.local_address(), "::1");
  std::thread other([&] {
    dist::TCPStore client("::1", master.port(), 2, /*is_master=*/false, 5s);
    EXPECT_EQ(client.local_address(), "::1");
    client.wait({"go"});  // ordered after the main thread's set
    EXPECT_EQ(client.get("go"), "1");
    EXPECT_EQ(client.add("n", 5), 7);  // after the main thread's add of 2
    client.set("ready", "yes");
  });
  EXPECT_EQ(master.add("n", 2), 2);
  master.set("go", "1");
  EXPECT_EQ(master.get("ready"), "yes");  // get waits for the key
  EXPECT_EQ(master.get("n"), "7");
  other.join();
  EXPECT_EQ(error_of<ember::DistributedError>([&] { master.wait({"never"}, 20ms); }),
            "wait timeout after 20ms, keys: never");
}

TEST(TCPStore, TheServerAnswersIPv4AndIPv6ClientsAlike) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  dist::TCPStore master("127.0.0.1", 0, 3, true, 5s);
  dist::TCPStore over_ipv6("::1", master.port(), 3, false, 5s);
  dist::TCPStore over_ipv4("127.0.0.1", master.port(), 3, false, 5s);
  EXPECT_EQ(over_ipv6.local_address(), "::1");
  EXPECT_EQ(over_ipv4.local_address(), "127.0.0.1");
  over_ipv6.set("k", "from ::1");
  EXPECT_EQ(over_ipv4.get("k"), "from ::1");
  EXPECT_EQ(master.get("k"), "from ::1");
}

TEST(TCPStore, UnreachableIPv6MasterNamesTheAddressInBrackets) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  ClosedIPv6Port port;
  std::string p = std::to_string(port.port());
  std::string message = error_of<ember::DistributedError>([&] { dist::TCPStore("::1", port.port(), 2, false, 200ms); });
  EXPECT_NE(message.find("The client socket has timed out after"), std::string::npos) << message;
  EXPECT_NE(message.find("while trying to connect to (::1, " + p +
                         "): Connection refused (errno 111) (tried [::1]:" + p + ")"),
            std::string::npos)
      << message;
}

// ---- FileStore -----------------------------------------------------------------------------

TEST(FileStore, TwoStoresShareTheFileWhichTheLastRemoves) {
  auto path = std::filesystem::temp_directory_path() / ("ember_filestore_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    dist::FileStore a(path.string(), 2, 5s), b(path.string(), 2, 5s);
    a.set("k", "v");
    EXPECT_EQ(b.get("k"), "v");
    EXPECT_EQ(a.add("n", 5), 5);
    EXPECT_EQ(b.add("n", 1), 6);
    EXPECT_TRUE(b.check({"k", "n"}));
    EXPECT_TRUE(b.delete_key("k"));
    EXPECT_FALSE(a.check({"k"}));
    EXPECT_EQ(error_of<ember::DistributedError>([&] { a.wait({"k"}, 20ms); }), "wait timeout after 20ms, keys: k");
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// ---- init errors and a group of one ------------------------------------------------------------

TEST(InitProcessGroup, ErrorsBeforeInit) {
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_EQ(error_of<ember::DistributedError>([] { dist::get_rank(); }),
            "Default process group has not been initialized, please make sure to call init_process_group.");
  EXPECT_EQ(error_of<ember::ValueError>([] { dist::init_process_group("mpi"); }),
            "Invalid backend: 'mpi' (ember supports 'gloo' and 'nccl')");
  EXPECT_EQ(error_of<ember::ValueError>([] {
              dist::init_process_group("gloo",
                                       dist::InitOptions().init_method("tcp://127.0.0.1:1").rank(0).world_size(0));
            }),
            "init_process_group: world_size must be positive, got 0");
  EXPECT_EQ(error_of<ember::ValueError>([] {
              dist::init_process_group("gloo",
                                       dist::InitOptions().init_method("tcp://127.0.0.1:1").rank(2).world_size(2));
            }),
            "init_process_group: rank 2 is out of range for world_size 2 (expected 0 <= rank < world_size)");
  EXPECT_FALSE(dist::is_initialized());
}

TEST(InitProcessGroup, EnvMethodNamesTheMissingVariable) {
  for (const char* name : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}) unsetenv(name);
  EXPECT_EQ(
      error_of<ember::ValueError>([] { dist::init_process_group("gloo"); }),
      "Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set");
}

TEST(InitProcessGroup, UnresolvableMasterAddress) {
  std::string message = error_of<ember::DistributedError>([] {
    dist::init_process_group(
        "gloo", dist::InitOptions().init_method("tcp://no-such-host.invalid:29500").rank(1).world_size(2).timeout(1s));
  });
  EXPECT_NE(message.find("Failed to resolve the address 'no-such-host.invalid'"), std::string::npos) << message;
}

TEST(InitProcessGroup, MalformedIPv6UrlsAreValueErrors) {
  auto error_for = [](const std::string& url) {
    return error_of<ember::ValueError>([&] {
      dist::init_process_group("gloo", dist::InitOptions().init_method(url).rank(0).world_size(1).timeout(1s));
    });
  };
  EXPECT_EQ(error_for("tcp://[::1:29500"),
            "init_process_group: invalid IPv6 URL in init_method 'tcp://[::1:29500': '[' without ']' (expected "
            "tcp://[IPv6 address]:port)");
  EXPECT_EQ(error_for("tcp://::1]:29500"),
            "init_process_group: invalid IPv6 URL in init_method 'tcp://::1]:29500': ']' without '[' (expected "
            "tcp://[IPv6 address]:port)");
  EXPECT_EQ(
      error_for("tcp://::1:29500"),
      "init_process_group: the IPv6 address in init_method 'tcp://::1:29500' must be in brackets: tcp://[::1]:port");
  EXPECT_EQ(
      error_for("tcp://[10.0.0.1]:29500"),
      "init_process_group: '10.0.0.1' in brackets in init_method 'tcp://[10.0.0.1]:29500' is not an IPv6 address");
  EXPECT_EQ(error_for("tcp://[]:29500"),
            "init_process_group: '' in brackets in init_method 'tcp://[]:29500' is not an IPv6 address");
  for (const char* url : {"tcp://[::1]", "tcp://[::1]:", "tcp://[::1]29500", "tcp://127.0.0.1", "tcp://:29500"}) {
    EXPECT_EQ(error_for(url), std::string("init_process_group: init_method '") + url + "' must be tcp://host:port");
  }
  EXPECT_EQ(error_for("tcp://[::1]:port"), "init_process_group: the port must be an integer, got 'port'");
  EXPECT_FALSE(dist::is_initialized());
}

TEST(InitProcessGroup, TcpUrlWithAnIPv6Address) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  // Port 0: rank 0 serves the store on a free port (a world of one needs no other rank).
  dist::init_process_group("gloo", dist::InitOptions().init_method("tcp://[::1]:0").rank(0).world_size(1).timeout(10s));
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(dist::get_world_size(), 1);
  ember::Tensor t = ember::arange(3, ember::kFloat32);
  dist::all_reduce(t);
  EXPECT_TRUE(t.equal(ember::arange(3, ember::kFloat32)));
  dist::destroy_process_group();
}

TEST(InitProcessGroup, RankThatNeverArrivesIsNamedAfterTheTimeout) {
  std::string message = error_of<ember::DistributedError>([] {
    dist::init_process_group("gloo",
                             dist::InitOptions().init_method("tcp://127.0.0.1:0").rank(0).world_size(3).timeout(300ms));
  });
  EXPECT_EQ(message,
            "init_process_group: timed out after 300ms on rank 0 waiting for rank(s) 1, 2 of world_size=3 to join");
  EXPECT_FALSE(dist::is_initialized());
}

TEST(InitProcessGroup, NcclNeedsTheDriverBackend) {
  if (ember::cuda::driver_is_available()) GTEST_SKIP() << "a GPU is present: the nccl backend can start";
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, 1, true, 5s);
  std::string message = error_of<ember::DistributedError>(
      [&] { dist::init_process_group("nccl", dist::InitOptions().store(store).rank(0).world_size(1)); });
  // A build without CUDA has no NCCL; a CUDA build on a machine without a GPU has no driver devices.
  bool explained = message.find("the nccl backend needs ember built with CUDA") != std::string::npos ||
                   message.find("the nccl backend needs the CUDA driver backend") != std::string::npos;
  EXPECT_TRUE(explained) << message;
  EXPECT_FALSE(dist::is_initialized());
}

TEST(InitProcessGroup, WorldOfOneOverAFileStore) {
  auto path = std::filesystem::temp_directory_path() / ("ember_pg_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  dist::init_process_group(
      "gloo", dist::InitOptions().init_method("file://" + path.string()).rank(0).world_size(1).timeout(10s));
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(dist::get_rank(), 0);
  EXPECT_EQ(dist::get_world_size(), 1);
  EXPECT_EQ(dist::get_backend(), "gloo");
  EXPECT_EQ(error_of<ember::DistributedError>([] { dist::init_process_group("gloo"); }),
            "trying to initialize the default process group twice!");
  ember::Tensor t = ember::arange(4, ember::kFloat32);
  dist::all_reduce(t, dist::ReduceOp::AVG);
  EXPECT_TRUE(t.equal(ember::arange(4, ember::kFloat32)));
  dist::all_reduce(t.view({2, 2}).t());  // a transpose takes part too (test_collectives_layout.cpp)
  EXPECT_TRUE(t.equal(ember::arange(4, ember::kFloat32)));
  EXPECT_EQ(error_of<ember::ValueError>([&] { dist::broadcast(t, 1); }),
            "broadcast: invalid root rank 1 for a world of 1 ranks");
  EXPECT_EQ(
      error_of<ember::ValueError>([&] { dist::all_reduce(ember::zeros({2}, ember::kComplex64), dist::ReduceOp::MAX); }),
      "all_reduce does not support MAX on complex tensors");
  dist::barrier();  // the rejected calls above left the group usable
  dist::destroy_process_group();
  EXPECT_FALSE(dist::is_initialized());
}

// ---- multi-process launches ------------------------------------------------------------------------

std::string launch_command(int ranks, const std::string& args) {
  return ember_run() + " --nproc-per-node=" + std::to_string(ranks) + " --term-timeout=10 " + worker() + " " + args;
}

TEST(Launch, CollectivesOnTwoRanks) {
  Launch launch = run(launch_command(2, ""));
  EXPECT_EQ(launch.status, 0) << launch.output;
}

TEST(Launch, CollectivesOnThreeRanks) {
  Launch launch = run(launch_command(3, ""));
  EXPECT_EQ(launch.status, 0) << launch.output;
}

TEST(Launch, SurvivorsOfADyingPeerGetADistributedErrorNamingIt) {
  Launch launch = run(launch_command(3, "--scenario=dying_peer"));
  EXPECT_EQ(launch.status, 128 + SIGKILL) << launch.output;
  EXPECT_NE(launch.output.find("ember-run: failed: rank 1 (local_rank 1) was killed by signal 9"), std::string::npos)
      << launch.output;
  for (int survivor : {0, 2}) {
    std::string line = "rank " + std::to_string(survivor) + ": DistributedError: all_reduce (collective #";
    auto at = launch.output.find(line);
    ASSERT_NE(at, std::string::npos) << launch.output;
    std::string rest = launch.output.substr(at, launch.output.find('\n', at) - at);
    EXPECT_NE(rest.find("peer rank 1 exited"), std::string::npos) << rest;
  }
}

TEST(Launch, AFailingRankStopsTheOthersAndIsNamed) {
  Launch launch = run(launch_command(2, "--scenario=failing_rank"));
  EXPECT_EQ(launch.status, 3) << launch.output;
  EXPECT_NE(launch.output.find("ember-run: rank 1 (local_rank 1, pid "), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("exited with code 3; stopping the other ranks"), std::string::npos) << launch.output;
}

TEST(Launch, ForwardsSigtermToEveryRank) {
  // ember-run itself is the child here (not a shell), so SIGTERM reaches it alone; it
  // must pass the signal on to both ranks, which report it.
  std::vector<std::string> args = {ember_run(), "--nproc-per-node=2", "--term-timeout=10", worker(),
                                   "--scenario=until_sigterm"};
  int fd = -1;
  pid_t pid = start_in_own_group(args, fd);
  std::string output;
  bool signalled = false;
  auto end = std::chrono::steady_clock::now() + 60s;
  char buffer[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0))) == 0) {
      ::kill(-pid, SIGKILL);
      output += "\n<killed at the test's deadline>";
      break;
    }
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
    if (!signalled && output.find("rank 0 ready") != std::string::npos &&
        output.find("rank 1 ready") != std::string::npos) {
      ::kill(pid, SIGTERM);
      signalled = true;
    }
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << output;
  EXPECT_NE(output.find("rank 0 got SIGTERM"), std::string::npos) << output;
  EXPECT_NE(output.find("rank 1 got SIGTERM"), std::string::npos) << output;
  EXPECT_NE(output.find("ember-run: received signal 15 (Terminated); forwarded it to every rank"), std::string::npos)
      << output;
}

TEST(Launch, BadOptionsPrintTheUsage) {
  Launch launch = run(ember_run() + " --nproc-per-node=0 " + worker());
  EXPECT_EQ(launch.status, 2) << launch.output;
  EXPECT_NE(launch.output.find("ember-run: --nproc-per-node must be at least 1"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("usage: ember-run"), std::string::npos) << launch.output;
}

TEST(Launch, MasterAddrIsTheIPv6Loopback) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  // env://: MASTER_ADDR=::1; Gloo's pairs connect over ::1, the address each rank reaches the store from.
  Launch launch = run(ember_run() +
                      " --nproc-per-node=2 --master-addr=[::1] --term-timeout=10 /bin/sh -c "
                      "'echo \"MASTER_ADDR=$MASTER_ADDR\"; exec " +
                      worker() + " --scenario=sum_ranks'");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_NE(launch.output.find("MASTER_ADDR=::1\n"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("rank 0 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("rank 1 of 2 (local rank 1): sum 3"), std::string::npos) << launch.output;
}

TEST(Launch, TcpUrlWithTheIPv6LoopbackOnTwoRanks) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  Launch launch = run(ember_run() + " --nproc-per-node=2 --master-addr=::1 --term-timeout=10 /bin/sh -c 'exec " +
                      worker() + " --scenario=sum_ranks --init-method=tcp://[::1]:$MASTER_PORT'");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_NE(launch.output.find("rank 0 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("rank 1 of 2 (local rank 1): sum 3"), std::string::npos) << launch.output;
}

TEST(Launch, Mpirun) {
  if (::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun (openmpi-bin) is not installed";
  // mpirun has no store of its own: take a free port from the kernel for rank 0 to serve on.
  int port = 0;
  {
    ClosedPort probe;
    port = probe.port();
  }
  std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  Launch launch = run("MASTER_PORT=" + std::to_string(port) + " mpirun" + root +
                      " --oversubscribe -np 3 -x MASTER_PORT " + worker() + " --scenario=sum_ranks");
  EXPECT_EQ(launch.status, 0) << launch.output;
  for (int r = 0; r < 3; ++r) {
    // One node: OpenMPI's local rank equals the rank.
    std::string line = "rank " + std::to_string(r) + " of 3 (local rank " + std::to_string(r) + "): sum 6";
    EXPECT_NE(launch.output.find(line), std::string::npos) << launch.output;
  }
}

}  // namespace

namespace {

/// Two network namespaces joined by a veth pair: two "hosts" on 10.231.0.0/24, or on
/// fd00:e3b::/64 alone (no IPv4 between them; nodad: the addresses are usable at once).
class NamespacePair {
 public:
  explicit NamespacePair(bool ipv6 = false)
      : a_("ember-a-" + std::to_string(::getpid())), b_("ember-b-" + std::to_string(::getpid())) {
    std::string a_addr = ipv6 ? "fd00:e3b::1/64 nodad" : "10.231.0.1/24";
    std::string b_addr = ipv6 ? "fd00:e3b::2/64 nodad" : "10.231.0.2/24";
    Launch setup = run("set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add veth-ember netns " + a_ +
                           " type veth peer name veth-ember netns " + b_ + "; ip -n " + a_ + " addr add " + a_addr +
                           " dev veth-ember; ip -n " + b_ + " addr add " + b_addr + " dev veth-ember; for ns in " + a_ +
                           " " + b_ + "; do ip -n $ns link set veth-ember up; ip -n $ns link set lo up; done",
                       20s);
    ok_ = setup.status == 0;
    error_ = setup.output;
  }
  ~NamespacePair() { run("ip netns del " + a_ + " 2>/dev/null; ip netns del " + b_ + " 2>/dev/null", 20s); }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
  bool ok_ = false;
  std::string error_;
};

/// One rank on each of the two hosts, meeting at `master_addr` (host a's address).
Launch run_on_two_hosts(const NamespacePair& hosts, const std::string& master_addr) {
  auto node = [&](const std::string& ns, int node_rank) {
    return "ip netns exec " + ns + " " + ember_run() + " --nnodes=2 --node-rank=" + std::to_string(node_rank) +
           " --nproc-per-node=1 --master-addr=" + master_addr + " --master-port=29500 --term-timeout=10 " + worker() +
           " --scenario=sum_ranks";
  };
  std::string script = "(";
  script += node(hosts.a(), 0);
  script += ") & first=$!; " + node(hosts.b(), 1) +
            "; second=$?; wait $first; first=$?; echo \"node statuses $first $second\"; "
            "[ $first -eq 0 ] && [ $second -eq 0 ]";
  return run(script);
}

TEST(Launch, TwoHostsInNetworkNamespaces) {
  NamespacePair hosts;
  if (!hosts.ok()) {
    GTEST_SKIP() << "cannot create network namespaces (needs root, iproute2 and a kernel that allows ip netns): "
                 << hosts.error();
  }
  Launch launch = run_on_two_hosts(hosts, "10.231.0.1");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_NE(launch.output.find("rank 0 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("rank 1 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
}

TEST(Launch, TwoHostsJoinedOnlyByIPv6) {
  NamespacePair hosts(/*ipv6=*/true);
  if (!hosts.ok()) {
    GTEST_SKIP() << "cannot create network namespaces with IPv6 addresses (needs root, iproute2, a kernel that "
                    "allows ip netns and IPv6): "
                 << hosts.error();
  }
  // Gloo's pairs must use each rank's IPv6 address on the link: the hosts have no IPv4 route to each other.
  Launch launch = run_on_two_hosts(hosts, "fd00:e3b::1");
  EXPECT_EQ(launch.status, 0) << launch.output;
  EXPECT_NE(launch.output.find("rank 0 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
  EXPECT_NE(launch.output.find("rank 1 of 2 (local rank 0): sum 3"), std::string::npos) << launch.output;
}

}  // namespace
