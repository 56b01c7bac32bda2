// The gloo process group with its ranks as threads of this process, meeting in an
// in-process TCPStore: world sizes 1, 3 and 5, tensors of 0, 1 and 7 elements (as Gloo's
// own tests do). Expected values are closed forms over rank r's input (r + 1) * (i + 1).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/record_exchange.h"
#include "ember/ember.h"
#include "ipv6_loopback.h"

namespace dist = ember::distributed;
using ember::detail::distributed::GroupSetup;
using ember::detail::distributed::ProcessGroup;
using ember::detail::distributed::RecordExchange;
using namespace std::chrono_literals;

namespace {

ember::Tensor ramp(int64_t n, int rank) {
  return ember::arange(1, n + 1, 1, ember::kFloat64).mul(ember::full({n}, rank + 1.0, ember::kFloat64));
}

/// Runs `body(group)` on `world` threads, one rank each, meeting at `host`; as in
/// init_process_group, Gloo binds the address each rank reaches the store from.
template <typename Body>
void on_ranks(int world, Body body, const std::string& host = "127.0.0.1") {
  auto master = std::make_shared<dist::TCPStore>(host, 0, world, true, 20s);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      auto store = r == 0 ? master : std::make_shared<dist::TCPStore>(host, master->port(), world, false, 20s);
      GroupSetup setup;
      setup.store = store;
      setup.local_address = store->local_address();
      setup.prefix = "test/";
      setup.rank = r;
      setup.world_size = world;
      setup.timeout = 20s;
      auto group = ember::detail::distributed::make_gloo_group(setup);
      body(*group);
    });
  }
  for (auto& t : ranks) t.join();
}

class GlooGroupWorlds : public ::testing::TestWithParam<int> {};

TEST_P(GlooGroupWorlds, EveryCollectiveOnCountsZeroOneAndSeven) {
  int world = GetParam();
  on_ranks(world, [world](ProcessGroup& group) {
    int rank = group.rank();
    for (int64_t n : {0, 1, 7}) {
      ember::Tensor sum = ramp(n, rank);
      group.all_reduce(sum, dist::ReduceOp::SUM, false)->wait();
      EXPECT_TRUE(sum.equal(ramp(n, 0).mul(ember::full({n}, world * (world + 1) / 2.0, ember::kFloat64)))) << n;

      ember::Tensor max = ramp(n, rank);
      group.all_reduce(max, dist::ReduceOp::MAX, true)->wait();
      EXPECT_TRUE(max.equal(ramp(n, world - 1))) << n;

      ember::Tensor b = ramp(n, rank);
      group.broadcast(b, world - 1, false)->wait();
      EXPECT_TRUE(b.equal(ramp(n, world - 1))) << n;

      std::vector<ember::Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(ember::zeros({n}, ember::kFloat64));
      group.all_gather(gathered, ramp(n, rank), false)->wait();
      for (int r = 0; r < world; ++r) EXPECT_TRUE(gathered[r].equal(ramp(n, r))) << n << " from " << r;

      std::vector<ember::Tensor> blocks;
      for (int r = 0; r < world; ++r) blocks.push_back(ramp(n, rank).add(ember::full({n}, 10.0 * r, ember::kFloat64)));
      ember::Tensor mine = ember::zeros({n}, ember::kFloat64);
      group.reduce_scatter(mine, blocks, dist::ReduceOp::AVG, false)->wait();
      EXPECT_TRUE(mine.allclose(ramp(n, 0)
                                    .mul(ember::full({n}, (world + 1) / 2.0, ember::kFloat64))
                                    .add(ember::full({n}, 10.0 * rank, ember::kFloat64))))
          << n;
    }
    group.barrier(false)->wait();
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooGroupWorlds, ::testing::Values(1, 3, 5));

TEST(GlooGroup, ListsOfTheWrongLengthAreRejectedOnEveryRank) {
  on_ranks(2, [](ProcessGroup& group) {
    std::vector<ember::Tensor> one{ember::zeros({2})};
    if (group.rank() == 0) {
      try {
        group.all_gather(one, ember::zeros({2}), false);
        ADD_FAILURE() << "no error";
      } catch (const ember::ValueError& e) {
        EXPECT_STREQ(e.what(), "all_gather: requires 2 output tensors (one per rank), got 1");
      }
    } else {
      std::vector<ember::Tensor> two{ember::zeros({2}), ember::zeros({2})};
      auto work = group.all_gather(two, ember::zeros({2}), true);
      try {
        work->wait();
        ADD_FAILURE() << "no error";
      } catch (const ember::DistributedError& e) {
        EXPECT_STREQ(
            e.what(),
            "all_gather (collective #1): rank 0 failed: all_gather: requires 2 output tensors (one per rank), got 1");
      }
      EXPECT_TRUE(work->is_completed());
      EXPECT_FALSE(work->is_success());
    }
    group.barrier(false)->wait();
  });
}

// All-reduces of at most RecordExchange::kPayloadCapacity bytes are gathered with the
// records and reduced locally; larger ones take Gloo's ring. Both give the same closed forms.
// The three all_reduce paths (Note [All-reduce paths]): in the record exchange up to its
// payload capacity, all-gathered while 2 peers * bytes <= 2 MiB (float64: 131072
// elements), the ring above.
TEST(GlooGroup, AllReduceOnEitherSideOfThePayloadCapacityAndTheGatherLimit) {
  constexpr int64_t kFits = static_cast<int64_t>(RecordExchange::kPayloadCapacity / sizeof(double));
  constexpr int64_t kGathered = (int64_t{2} << 20) / 2 / static_cast<int64_t>(sizeof(double));
  on_ranks(3, [](ProcessGroup& group) {
    int rank = group.rank();
    for (int64_t n : {kFits, kFits + 1, kGathered, kGathered + 1}) {
      ember::Tensor sum = ramp(n, rank);
      group.all_reduce(sum, dist::ReduceOp::SUM, false)->wait();
      EXPECT_TRUE(sum.equal(ramp(n, 0).mul(ember::full({n}, 6.0, ember::kFloat64)))) << n;

      ember::Tensor avg = ramp(n, rank);
      group.all_reduce(avg, dist::ReduceOp::AVG, true)->wait();
      EXPECT_TRUE(avg.equal(ramp(n, 1))) << n;

      // (i + 1)^3 * 6: exact in float64 below 2^53, for the first 100000 elements.
      ember::Tensor product = ramp(n, rank);
      group.all_reduce(product, dist::ReduceOp::PRODUCT, false)->wait();
      const int64_t exact = std::min<int64_t>(n, 100000);
      EXPECT_TRUE(product.narrow(0, 0, exact)
                      .equal(ramp(exact, 0)
                                 .mul(ramp(exact, 0))
                                 .mul(ramp(exact, 0))
                                 .mul(ember::full({exact}, 6.0, ember::kFloat64))))
          << n;

      ember::Tensor min = ramp(n, rank);
      group.all_reduce(min, dist::ReduceOp::MIN, false)->wait();
      EXPECT_TRUE(min.equal(ramp(n, 0))) << n;
    }
  });
}

// Ranks whose tensors fall on either side of the capacity, or of the gather limit (2 MiB
// for 2 ranks: 262144 float64 elements), take different paths but exchange their records
// intact: both get the mismatch, and the group goes on.
TEST(GlooGroup, SizesOnEitherSideOfAPathBoundaryAreAMismatch) {
  constexpr int64_t kFits = static_cast<int64_t>(RecordExchange::kPayloadCapacity / sizeof(double));
  constexpr int64_t kGathered = (int64_t{2} << 20) / static_cast<int64_t>(sizeof(double));
  on_ranks(2, [](ProcessGroup& group) {
    int rank = group.rank();
    int64_t sequence = 0;
    for (int64_t below : {kFits, kGathered}) {
      const int64_t mine_n = rank == 0 ? below : below + 1, theirs_n = rank == 0 ? below + 1 : below;
      ember::Tensor t = ember::ones({mine_n}, ember::kFloat64);
      const std::string number = "(collective #" + std::to_string(++sequence) + ")";
      try {
        group.all_reduce(t, dist::ReduceOp::SUM, false)->wait();
        ADD_FAILURE() << "no error on rank " << rank;
      } catch (const ember::DistributedError& e) {
        EXPECT_EQ(std::string(e.what()), "all_reduce " + number + ": rank " + std::to_string(1 - rank) +
                                             " called all_reduce of " + std::to_string(theirs_n) +
                                             " elements of float64 with SUM " + number + " while rank " +
                                             std::to_string(rank) + " called all_reduce of " + std::to_string(mine_n) +
                                             " elements of float64 with SUM; every rank must call the same "
                                             "collectives, in the same order, on matching tensors");
      }
      EXPECT_TRUE(t.equal(ember::ones({mine_n}, ember::kFloat64)));  // untouched
      ember::Tensor after = ember::full({3}, rank + 1.0, ember::kFloat64);
      ++sequence;
      group.all_reduce(after, dist::ReduceOp::SUM, false)->wait();
      EXPECT_TRUE(after.equal(ember::full({3}, 3.0, ember::kFloat64)));
    }
  });
}

// Async all-reduces queued back to back complete in order with their own results.
TEST(GlooGroup, QueuedAsyncAllReducesKeepTheirOrder) {
  on_ranks(2, [](ProcessGroup& group) {
    int rank = group.rank();
    std::vector<ember::Tensor> tensors;
    std::vector<std::shared_ptr<dist::Work>> works;
    for (int i = 0; i < 8; ++i) {
      tensors.push_back(ember::full({i + 1}, (rank + 1.0) * (i + 1), ember::kFloat64));
      works.push_back(group.all_reduce(tensors.back(), i % 2 ? dist::ReduceOp::MAX : dist::ReduceOp::SUM, true));
    }
    for (int i = 0; i < 8; ++i) {
      works[i]->wait();
      EXPECT_TRUE(tensors[i].equal(ember::full({i + 1}, (i % 2 ? 2.0 : 3.0) * (i + 1), ember::kFloat64))) << i;
    }
  });
}

// Two ranks meeting at ::1: Gloo's pairs connect over IPv6. Both all_reduce paths that
// move data through Gloo's transport (the record exchange and the ring).
TEST(GlooGroup, AllReduceBetweenRanksMeetingAtTheIPv6Loopback) {
  SKIP_WITHOUT_IPV6_LOOPBACK();
  constexpr int64_t kRing = (int64_t{2} << 20) / static_cast<int64_t>(sizeof(double)) + 1;
  on_ranks(
      2,
      [](ProcessGroup& group) {
        for (int64_t n : {int64_t{7}, kRing}) {
          ember::Tensor t = ramp(n, group.rank());
          group.all_reduce(t, dist::ReduceOp::SUM, false)->wait();
          EXPECT_TRUE(t.equal(ramp(n, 0).mul(ember::full({n}, 3.0, ember::kFloat64)))) << n;
        }
        group.barrier(false)->wait();
      },
      "::1");
}

TEST(GlooGroup, ALocalAddressThisHostCannotBindIsADistributedError) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, 1, true, 5s);
  GroupSetup setup;
  setup.store = store;
  setup.local_address = "192.0.2.1";  // TEST-NET-1 (RFC 5737): on no interface of this host
  setup.prefix = "test/";
  setup.timeout = 5s;
  try {
    ember::detail::distributed::make_gloo_group(setup);
    ADD_FAILURE() << "no error";
  } catch (const ember::DistributedError& e) {
    EXPECT_EQ(std::string(e.what()),
              "init_process_group: Gloo cannot listen on address 192.0.2.1 of rank 0: Cannot assign requested address "
              "(errno 99); set GLOO_SOCKET_IFNAME to the interface its peers reach it on");
  }
}

}  // namespace
