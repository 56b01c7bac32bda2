// DistributedDataParallel on 2 ranks: the training step of bench_autograd's 784-512-512-10
// MLP (float32, cross entropy, SGD), batch 128 per rank, cpu tensors, gloo over loopback,
// beside PyTorch's DDP with gloo (Debian's python3-torch, bench/ddp_torch.py) in the same run.
//
//   bench_ddp [--repetitions=N] [--steps=N]
//
// Each side times, per step (best repetition's mean on rank 0):
//   alone       the step on the bare module on rank 0 while rank 1 waits;
//   local       the step on the bare module, both ranks at once, no communication;
//   ddp         the same step through DDP (backward all-reduces the buckets);
//   all-reduce  the buckets' all-reduces alone (issued async back to back, then waited).
// Repetitions take local, ddp and all-reduce in turn. hidden = (no-communication step +
// all-reduce - ddp) / all-reduce, clamped to [0, 1]: the share of the all-reduce time that
// overlapping with backward takes off the step, against either baseline (alone or local;
// with a free core per rank they agree). Every rank runs one compute thread
// (EMBER_NUM_THREADS=1, torch.set_num_threads(1)): on 2 cores the two ranks and Gloo's
// threads already share the machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench_args.h"
#include "ember/ember.h"
#include "rank_launch.h"

namespace dist = ember::distributed;
namespace nn = ember::nn;

namespace {

constexpr int64_t kBatch = 128;
enum Figure : int64_t { kLocal = 0, kDdp = 1, kAllReduce = 2, kAlone = 3 };

std::shared_ptr<nn::Sequential> mlp() {
  ember::manual_seed(0);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 512), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(512, 512),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(512, 10)});
}

/// Each step's best repetition's mean time, in microseconds. Repetitions take the steps in
/// turn (local, ddp, all-reduce, local, ...), so that a busy spell of the shared machine
/// does not land on one of them alone; every rank starts each timing together.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& step, int repetitions, int steps) {
  std::vector<double> best(step.size(), std::numeric_limits<double>::infinity());
  for (const auto& s : step) {
    for (int i = 0; i < 3; ++i) s();
  }
  for (int r = 0; r < repetitions; ++r) {
    for (size_t k = 0; k < step.size(); ++k) {
      dist::barrier();
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) step[k]();
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best[k] = std::min(best[k], elapsed.count() / steps * 1e6);
    }
  }
  return best;
}

int rank_worker(int repetitions, int steps) {
  dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(120)));
  ember::manual_seed(1 + dist::get_rank());
  ember::Tensor x = ember::randn({kBatch, 784});
  ember::Tensor y = (ember::rand({kBatch}) * 10.0).to(ember::kInt64);  // classes 0..9

  auto local = mlp();
  ember::optim::SGD local_sgd(local->parameters(), ember::optim::SGDOptions(0.01));
  auto net = mlp();
  nn::parallel::DistributedDataParallel ddp(net);
  ember::optim::SGD sgd(ddp.parameters(), ember::optim::SGDOptions(0.01));
  std::vector<ember::Tensor> buckets;
  auto params = net->parameters();
  for (const auto& bucket : ddp.bucket_indices()) {
    int64_t numel = 0;
    for (size_t i : bucket) numel += params[i].numel();
    buckets.push_back(ember::zeros({numel}));
  }
  auto local_step = [&] {
    local_sgd.zero_grad();
    nn::functional::cross_entropy(local->forward(x), y).backward();
    local_sgd.step();
  };
  auto t = time_interleaved({local_step,
                             [&] {
                               sgd.zero_grad();
                               nn::functional::cross_entropy(ddp(x), y).backward();
                               sgd.step();
                             },
                             [&] {
                               std::vector<std::shared_ptr<dist::Work>> works;
                               for (const auto& b : buckets)
                                 works.push_back(dist::all_reduce(b, dist::ReduceOp::AVG, /*async_op=*/true));
                               for (const auto& w : works) w->wait();
                             }},
                            repetitions, steps);
  double t_local = t[kLocal], t_ddp = t[kDdp], t_all_reduce = t[kAllReduce];
  // The local step on rank 0 while the other rank waits: the step without a neighbour
  // competing for the two cores.
  double t_alone = 0;
  for (int r = 0; r < dist::get_world_size(); ++r) {
    dist::barrier();
    if (dist::get_rank() != r) continue;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < repetitions; ++k) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) local_step();
      best =
          std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps * 1e6);
    }
    if (r == 0) t_alone = best;
  }

  if (dist::get_rank() == 0) {
    std::printf("ember %d %.2f\nember %d %.2f\nember %d %.2f\nember %d %.2f\n", int(kLocal), t_local, int(kDdp), t_ddp,
                int(kAllReduce), t_all_reduce, int(kAlone), t_alone);
    for (size_t k = 0; k < buckets.size(); ++k)
      std::printf("bucket %zu %lld\n", k, static_cast<long long>(buckets[k].numel()));
    std::fflush(stdout);
  }
  dist::barrier();
  dist::destroy_process_group();
  return 0;
}

constexpr const char* kUsage = "usage: bench_ddp [--repetitions=N] [--steps=N] [--help]\n";

double hidden(double local, double ddp, double all_reduce) {
  return all_reduce > 0 ? std::clamp((local + all_reduce - ddp) / all_reduce, 0.0, 1.0) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 5, steps = 20;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--repetitions=", 14) == 0) repetitions = std::max(1, std::atoi(argv[i] + 14));
    else if (std::strncmp(argv[i], "--steps=", 8) == 0) steps = std::max(1, std::atoi(argv[i] + 8));
    else if (std::strcmp(argv[i], "--rank-worker") == 0) worker = true;
    else other_argument("bench_ddp", argv[i], kUsage);
  }
  if (worker) return rank_worker(repetitions, steps);

  std::string args = " --repetitions=" + std::to_string(repetitions) + " --steps=" + std::to_string(steps);
  auto ours = collect("EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 " + std::string(EMBER_RUN_PATH) +
                      " --nproc-per-node=2 " + argv[0] + " --rank-worker" + args);
  auto& e = ours["ember"];
  std::string bucket_sizes;
  for (const auto& [index, numel] : ours["bucket"]) bucket_sizes += " " + std::to_string(static_cast<int64_t>(numel));
  auto t = collect("OMP_NUM_THREADS=1 /usr/bin/python3 " + std::string(EMBER_BENCH_SOURCE_DIR) + "/ddp_torch.py " +
                   std::to_string(free_port()) + " " + std::to_string(repetitions) + " " + std::to_string(steps) +
                   bucket_sizes + " 2>/dev/null")["torch"];

  std::printf(
      "DDP training step, 784-512-512-10 MLP, batch %lld per rank, 2 ranks, cpu, gloo over loopback\n"
      "(best of %d repetitions of %d steps; buckets of%s floats)\n",
      static_cast<long long>(kBatch), repetitions, steps, bucket_sizes.c_str());
  std::printf("%-6s %10s %10s %10s %14s %14s %14s\n", "", "alone us", "local us", "DDP us", "all-reduce us",
              "hidden (alone)", "hidden (local)");
  for (auto& [name, m] : {std::pair<const char*, std::map<int64_t, double>&>{"ember", e}, {"torch", t}}) {
    if (m.size() < 4) {
      std::printf("%-6s (no result)\n", name);
      continue;
    }
    std::printf("%-6s %10.0f %10.0f %10.0f %14.0f %13.0f%% %13.0f%%\n", name, m[kAlone], m[kLocal], m[kDdp],
                m[kAllReduce], 100 * hidden(m[kAlone], m[kDdp], m[kAllReduce]),
                100 * hidden(m[kLocal], m[kDdp], m[kAllReduce]));
  }
  if (e.size() >= 4 && t.size() >= 4) std::printf("ember / torch, DDP step: %.2f\n", e[kDdp] / t[kDdp]);
  return e.size() >= 4 ? 0 : 1;
}
