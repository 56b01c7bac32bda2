// The program each rank runs in the multi-process tests (test_distributed.cpp launches it
// with ember-run or mpirun). Every rank runs the same GoogleTest tests in the same order,
// so their collectives match; a failure on any rank fails the launch.
//
// Expected values are closed forms over the ranks' inputs (rank r holds (r + 1) * (i + 1)
// at index i), the same numbers torch.distributed gives for these inputs.
//
// `worker --scenario=NAME` runs one fault scenario instead (see scenarios below);
// `--init-method=URL` meets over URL (rank and world size from RANK and WORLD_SIZE)
// instead of env://.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ember/ember.h"

namespace dist = ember::distributed;
using ember::Tensor;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

/// (rank + 1) * (i + 1) for i < n.
Tensor ramp(int64_t n, ember::DType dtype, const std::string& device, int of_rank) {
  return ember::arange(1, n + 1, 1, ember::TensorOptions(dtype))
      .mul(ember::full({n}, of_rank + 1, dtype))
      .to(ember::Device(device));
}

double expected(dist::ReduceOp op, int64_t i, int w, bool integral) {
  double x = static_cast<double>(i + 1), sum = x * w * (w + 1) / 2;
  switch (op) {
    case dist::ReduceOp::SUM: return sum;
    case dist::ReduceOp::AVG: return integral ? std::trunc(sum / w) : sum / w;
    case dist::ReduceOp::PRODUCT: return std::tgamma(w + 1) * std::pow(x, w);
    case dist::ReduceOp::MIN: return x;
    case dist::ReduceOp::MAX: return x * w;
  }
  return 0;
}

class Collectives : public ::testing::TestWithParam<std::string> {
 protected:
  std::string device() const {
    return GetParam() == "cpu" ? "cpu" : "cuda:" + std::to_string(rank() % ember::cuda::device_count());
  }
};

TEST_P(Collectives, AllReduceEveryOpAndDtype) {
  for (ember::DType dtype : {ember::kFloat32, ember::kFloat64, ember::kInt64, ember::kInt32, ember::kFloat16}) {
    for (auto op : {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::PRODUCT, dist::ReduceOp::MIN,
                    dist::ReduceOp::MAX}) {
      Tensor t = ramp(5, dtype, device(), rank());
      dist::all_reduce(t, op);
      EXPECT_EQ(t.device(), ember::Device(device()));
      auto values = t.to(ember::kFloat64).cpu().to_vector<double>();
      bool integral = ember::is_integral(dtype);
      for (int64_t i = 0; i < 5; ++i) {
        EXPECT_DOUBLE_EQ(values[i], expected(op, i, world(), integral))
            << dist::reduce_op_name(op) << " " << ember::dtype_name(dtype) << " index " << i;
      }
    }
  }
}

TEST_P(Collectives, AllReduceLargeTensor) {
  // Large enough for Gloo's ring to split it into several segments.
  Tensor t = ember::full({1 << 20}, rank() + 1, ember::TensorOptions(ember::kFloat32).device(ember::Device(device())));
  dist::all_reduce(t);
  float sum = static_cast<float>(world() * (world() + 1) / 2);
  EXPECT_TRUE(t.cpu().equal(ember::full({1 << 20}, sum)));
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  for (int src = 0; src < world(); ++src) {
    Tensor t = ramp(7, ember::kFloat32, device(), rank());
    dist::broadcast(t, src);
    EXPECT_TRUE(t.cpu().equal(ramp(7, ember::kFloat32, "cpu", src))) << "src " << src;
  }
}

TEST_P(Collectives, AllGather) {
  std::vector<Tensor> outs;
  for (int r = 0; r < world(); ++r)
    outs.push_back(ember::zeros({2, 3}, ember::TensorOptions(ember::kInt64).device(ember::Device(device()))));
  Tensor mine = ramp(6, ember::kInt64, device(), rank()).view({2, 3});
  dist::all_gather(outs, mine);
  for (int r = 0; r < world(); ++r) {
    EXPECT_TRUE(outs[r].cpu().equal(ramp(6, ember::kInt64, "cpu", r).view({2, 3}))) << "from rank " << r;
  }
}

TEST_P(Collectives, ReduceScatter) {
  for (auto op : {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::MAX}) {
    std::vector<Tensor> ins;
    // Block b of rank r's input holds (r + 1) * (i + 1) + 100 * b.
    for (int b = 0; b < world(); ++b)
      ins.push_back(ramp(4, ember::kFloat64, "cpu", rank())
                        .add(ember::full({4}, 100.0 * b, ember::kFloat64))
                        .to(ember::Device(device())));
    Tensor out = ember::zeros({4}, ember::TensorOptions(ember::kFloat64).device(ember::Device(device())));
    dist::reduce_scatter(out, ins, op);
    auto values = out.cpu().to_vector<double>();
    for (int64_t i = 0; i < 4; ++i) {
      double shift = 100.0 * rank();
      double want = op == dist::ReduceOp::SUM ? expected(op, i, world(), false) + shift * world()
                                              : expected(op, i, world(), false) + shift;
      EXPECT_DOUBLE_EQ(values[i], want) << dist::reduce_op_name(op) << " index " << i;
    }
  }
}

TEST_P(Collectives, AsyncWorkCompletesInOrder) {
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(ember::full({1000}, (rank() + 1) * (k + 1),
                                  ember::TensorOptions(ember::kFloat32).device(ember::Device(device()))));
    works.push_back(dist::all_reduce(tensors.back(), dist::ReduceOp::SUM, /*async_op=*/true));
  }
  for (int k = 3; k >= 0; --k) {
    works[k]->wait();
    EXPECT_TRUE(works[k]->is_completed());
    EXPECT_TRUE(works[k]->is_success());
    EXPECT_TRUE(works[k]->result()[0].is_same(tensors[k]));
    float want = static_cast<float>((k + 1) * world() * (world() + 1) / 2);
    EXPECT_TRUE(tensors[k].cpu().equal(ember::full({1000}, want))) << "work " << k;
  }
}

TEST_P(Collectives, Barrier) {
  auto work = dist::barrier(/*async_op=*/true);
  work->wait();
  EXPECT_TRUE(work->is_success());
  dist::barrier();
}

TEST_P(Collectives, MismatchedSizesFailOnEveryRankThenTheGroupGoesOn) {
  Tensor t = ember::ones({rank() == 1 ? 5 : 4}, ember::TensorOptions().device(ember::Device(device())));
  try {
    dist::all_reduce(t);
    ADD_FAILURE() << "no error";
  } catch (const ember::DistributedError& e) {
    std::string peer = rank() == 1 ? "rank 0" : "rank 1";
    EXPECT_NE(std::string(e.what()).find("all_reduce (collective #"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(peer + " called all_reduce of " + (rank() == 1 ? "4" : "5") + " elements"),
              std::string::npos)
        << e.what();
  }
  Tensor u = ember::ones({3}, ember::TensorOptions().device(ember::Device(device())));
  dist::all_reduce(u);
  EXPECT_TRUE(u.cpu().equal(ember::full({3}, static_cast<float>(world()))));
}

TEST_P(Collectives, DifferentCollectivesFailOnEveryRank) {
  Tensor t = ember::ones({4}, ember::TensorOptions().device(ember::Device(device())));
  try {
    if (rank() == 1) {
      dist::broadcast(t, 0);
    } else {
      dist::all_reduce(t);
    }
    ADD_FAILURE() << "no error";
  } catch (const ember::DistributedError& e) {
    std::string text = e.what();
    if (rank() == 1) {
      EXPECT_NE(text.find("broadcast (collective #"), std::string::npos) << text;
      EXPECT_NE(text.find("rank 0 called all_reduce"), std::string::npos) << text;
    } else {
      EXPECT_NE(text.find("rank 1 called broadcast of 4 elements of float32 from rank 0"), std::string::npos) << text;
    }
  }
  dist::barrier();
}

TEST_P(Collectives, TensorsOnDifferentDevicesFailLocallyAndOnThePeers) {
  Tensor input = ember::ones({2}, ember::TensorOptions().device(ember::Device(device())));
  std::vector<Tensor> outs;
  for (int r = 0; r < world(); ++r) {
    // Rank 1 passes one output on the other kind of device.
    bool other = rank() == 1 && r == 0;
    std::string where = other ? (device() == "cpu" ? "cuda:0" : "cpu") : device();
    outs.push_back(ember::zeros({2}, ember::TensorOptions().device(ember::Device(where))));
  }
  if (rank() == 1) {
    try {
      dist::all_gather(outs, input);
      ADD_FAILURE() << "no error";
    } catch (const ember::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("all_gather: Expected all tensors to be on the same device"),
                std::string::npos)
          << e.what();
    }
  } else {
    try {
      dist::all_gather(outs, input);
      ADD_FAILURE() << "no error";
    } catch (const ember::DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("all_gather (collective #"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1 failed: all_gather: Expected all tensors to be on the same device"),
                std::string::npos)
          << e.what();
    }
  }
  dist::barrier();
}

INSTANTIATE_TEST_SUITE_P(Devices, Collectives, ::testing::Values("cpu", "cuda"));

TEST(StreamOrder, AllReduceSeesTheWriteQueuedBeforeIt) {
  // A delay, then a write, both on the current stream: the collective must start after
  // them (Note [Collective ordering] (A)); then work queued after it sees its result (B).
  auto device = ember::Device("cuda:" + std::to_string(rank() % ember::cuda::device_count()));
  ember::cuda::set_device(device.index());
  Tensor t = ember::zeros({256}, ember::TensorOptions().device(device));
  ember::cuda::synchronize();
  ember::cuda::sleep(std::chrono::milliseconds(50));
  t.fill_(rank() + 1);
  dist::all_reduce(t);
  Tensor doubled = t.mul(ember::full({256}, 2.0f, ember::TensorOptions().device(device)));  // queued after it
  float sum = static_cast<float>(world() * (world() + 1) / 2);
  EXPECT_TRUE(t.cpu().equal(ember::full({256}, sum)));
  EXPECT_TRUE(doubled.cpu().equal(ember::full({256}, 2 * sum)));
}

TEST(StreamOrder, AsyncWaitOrdersLaterStreamWork) {
  auto device = ember::Device("cuda:" + std::to_string(rank() % ember::cuda::device_count()));
  ember::cuda::set_device(device.index());
  ember::cuda::Stream side(device.index());
  ember::cuda::StreamGuard guard(side);
  Tensor t = ember::zeros({64}, ember::TensorOptions().device(device));
  ember::cuda::sleep(std::chrono::milliseconds(20));
  t.fill_(rank() + 1);
  auto work = dist::all_reduce(t, dist::ReduceOp::MAX, /*async_op=*/true);
  work->wait();
  t.add_(ember::ones({64}, ember::TensorOptions().device(device)));
  EXPECT_TRUE(t.cpu().equal(ember::full({64}, static_cast<float>(world() + 1))));
}

// ---- fault scenarios ---------------------------------------------------------------------

/// Rank 1 dies (SIGKILL) in the middle of a large all_reduce; the others report the
/// DistributedError they get (at once, or at the 3 s timeout) and exit 3. They ignore ember-run's SIGTERM so that their
/// report is not cut short (ember-run kills them after --term-timeout otherwise).
int dying_peer() {
  signal(SIGTERM, SIG_IGN);
  Tensor t = ember::ones({16 << 20});
  dist::barrier();  // every rank connected: the death happens mid-collective, not mid-init
  if (rank() == 1) {
    auto work = dist::all_reduce(t, dist::ReduceOp::SUM, /*async_op=*/true);
    ::kill(::getpid(), SIGKILL);
  }
  try {
    for (int k = 0; k < 100; ++k) dist::all_reduce(t);
    std::fprintf(stderr, "rank %d: no error\n", rank());
    return 1;
  } catch (const ember::DistributedError& e) {
    std::fprintf(stderr, "rank %d: DistributedError: %s\n", rank(), e.what());
    return 3;
  }
}

/// Once every rank is connected, rank 1 exits with code 3; the others wait for ever
/// (pause), so only ember-run stopping them ends the launch.
int failing_rank() {
  dist::barrier();
  if (rank() == 1) return 3;
  for (;;) ::pause();
}

int term_pipe[2] = {-1, -1};

/// Every rank reports "ready" after a barrier, then waits for SIGTERM (which ember-run
/// forwards) and exits 0 once it arrives. The handler may run on any thread (sanitizer
/// runtimes have their own), so it only writes to a pipe that main() reads.
int until_sigterm() {
  if (::pipe(term_pipe) != 0) return 1;
  struct sigaction action {};
  action.sa_handler = [](int) {
    char byte = 1;
    (void)!::write(term_pipe[1], &byte, 1);
  };
  ::sigaction(SIGTERM, &action, nullptr);
  dist::barrier();
  std::printf("rank %d ready\n", rank());
  std::fflush(stdout);
  char byte = 0;
  while (::read(term_pipe[0], &byte, 1) != 1) {
  }
  std::printf("rank %d got SIGTERM\n", rank());
  std::fflush(stdout);
  return 0;
}

/// One all_reduce, printed: the smallest check of a launch (mpirun, namespaces).
int sum_ranks() {
  Tensor t = ember::full({4}, static_cast<double>(rank() + 1), ember::kFloat64);
  dist::all_reduce(t);
  const char* local_rank = std::getenv("LOCAL_RANK");
  std::printf("rank %d of %d (local rank %s): sum %g\n", rank(), world(), local_rank ? local_rank : "unset",
              t.to_vector<double>()[0]);
  return t.to_vector<double>()[0] == world() * (world() + 1) / 2.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ember::cuda::emulate(2, size_t{256} << 20);
  std::string scenario, init_method;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--scenario=", 11) == 0) scenario = argv[i] + 11;
    if (std::strncmp(argv[i], "--init-method=", 14) == 0) init_method = argv[i] + 14;
  }
  // A survivor that is not the dead rank's neighbour in Gloo's ring learns of the death
  // only at the timeout: keep it short where a death is the point.
  auto timeout = scenario == "dying_peer" ? std::chrono::seconds(3) : std::chrono::seconds(20);
  dist::InitOptions options;
  options.timeout(timeout);
  if (!init_method.empty()) {
    // tcp://host:port takes the rank and world size from the caller, as PyTorch's does.
    options.init_method(init_method)
        .rank(std::atoi(std::getenv("RANK")))
        .world_size(std::atoi(std::getenv("WORLD_SIZE")));
  }
  dist::init_process_group("gloo", options);
  int status;
  if (scenario == "dying_peer") {
    status = dying_peer();
  } else if (scenario == "failing_rank") {
    status = failing_rank();
  } else if (scenario == "until_sigterm") {
    status = until_sigterm();
  } else if (scenario == "sum_ranks") {
    status = sum_ranks();
  } else {
    ::testing::InitGoogleTest(&argc, argv);
    status = RUN_ALL_TESTS();
  }
  if (scenario != "dying_peer" && scenario != "until_sigterm") dist::destroy_process_group();
  return status;
}
