// CUDA graphs on an emulated device: what a replay saves against issuing the same work.
//
// eager_100_ops / graph_100_ops: the host's cost of issuing 100 small element-wise ops on
// a stream, against replaying a graph that captured them (both drain the queue every 64
// iterations, inside the timing).
// eager_train_step / graph_train_step: one training step of a small MLP (forward,
// cross-entropy, backward, Adam with capturable=True), eager against a replay of the
// captured step, each waited for (end-to-end time per step).
// eager_ddp_step / graph_ddp_step (only under ember-run, e.g. `ember-run --nproc-per-node=2
// bench_graphs --benchmark_filter=ddp`): the same step of a DistributedDataParallel model on
// cuda:RANK with Gloo, eager against a replay of the step captured whole (its all_reduces
// host-task nodes of the graph), a fixed iteration count so that the ranks agree.
// The ratios eager / graph of wall time and of the issuing thread's CPU time (the host
// cost) are printed at the end, from this run. On an emulated device the kernels run on
// host threads too, so the wall time of work-bound steps gains little.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "ember/ember.h"

namespace cuda = ember::cuda;
namespace nn = ember::nn;
using ember::Tensor;

namespace {

const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  const char* world = std::getenv("WORLD_SIZE");
  cuda::emulate(world ? std::max(1, std::atoi(world)) : 1, size_t{1} << 30);
  return true;
}();

const ember::TensorOptions kOnDevice = ember::TensorOptions().device(ember::Device(ember::kCUDA, 0));
constexpr int kOps = 100;

void issue_ops(Tensor& x) {
  for (int i = 0; i < kOps; ++i) x *= 1.0001;
}

void eager_100_ops(benchmark::State& state) {
  Tensor x = ember::ones({256}, kOnDevice);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::StreamGuard guard(side);
  int64_t n = 0;
  for (auto _ : state) {
    issue_ops(x);
    if (++n % 64 == 0) side.synchronize();
  }
  side.synchronize();
  state.SetItemsProcessed(state.iterations() * kOps);
}
BENCHMARK(eager_100_ops);

void graph_100_ops(benchmark::State& state) {
  Tensor x = ember::ones({256}, kOnDevice);
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g);
    issue_ops(x);
  }
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::StreamGuard guard(side);
  int64_t n = 0;
  for (auto _ : state) {
    g.replay();
    if (++n % 64 == 0) side.synchronize();
  }
  side.synchronize();
  state.SetItemsProcessed(state.iterations() * kOps);
}
BENCHMARK(graph_100_ops);

struct TrainSetup {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<ember::optim::Adam> optimizer;
  Tensor input, target;
  TrainSetup() {
    ember::manual_seed(0);
    model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 128),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10)});
    model->to(ember::Device(ember::kCUDA, 0));
    optimizer =
        std::make_unique<ember::optim::Adam>(model->parameters(), ember::optim::AdamOptions(1e-3).capturable(true));
    input = ember::randn({32, 64}, kOnDevice);
    target = ember::randn({32, 10}, kOnDevice).argmax(1, false);  // class indices
  }
  Tensor step() {
    optimizer->zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(input), target);
    loss.backward();
    optimizer->step();
    return loss;
  }
};

void eager_train_step(benchmark::State& state) {
  TrainSetup setup;
  for (auto _ : state) {
    setup.step();
    cuda::synchronize();
  }
}
BENCHMARK(eager_train_step);

void graph_train_step(benchmark::State& state) {
  TrainSetup setup;
  setup.step();  // warm-up: the optimizer's state
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g);
    setup.step();
  }
  for (auto _ : state) {
    g.replay();
    cuda::synchronize();
  }
}
BENCHMARK(graph_train_step);

// The step of TrainSetup's model wrapped in DDP, on this rank's device.
struct DdpSetup {
  int device = ember::distributed::get_rank();
  cuda::DeviceGuard device_guard{device};
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<nn::parallel::DistributedDataParallel> ddp;
  std::unique_ptr<ember::optim::Adam> optimizer;
  Tensor input, target;
  DdpSetup() {
    TrainSetup base;
    model = base.model;
    model->to(ember::Device(ember::kCUDA, device));
    cuda::Stream side(device);  // the note's recipe: DDP built, and warmed up, on a side stream
    side.wait_stream(cuda::current_stream(device));
    {
      cuda::StreamGuard guard(side);
      ddp = std::make_shared<nn::parallel::DistributedDataParallel>(model);
      optimizer =
          std::make_unique<ember::optim::Adam>(model->parameters(), ember::optim::AdamOptions(1e-3).capturable(true));
      input = base.input.to(ember::Device(ember::kCUDA, device));
      target = base.target.to(ember::Device(ember::kCUDA, device));
      for (int i = 0; i < 3; ++i) step();
    }
    cuda::current_stream(device).wait_stream(side);
    cuda::synchronize(device);
  }
  void step() {
    optimizer->zero_grad();
    nn::functional::cross_entropy(ddp->forward(input), target).backward();
    optimizer->step();
  }
};

constexpr int64_t kDdpSteps = 300;

void eager_ddp_step(benchmark::State& state) {
  DdpSetup setup;
  for (auto _ : state) {
    setup.step();
    cuda::synchronize(setup.device);
  }
}

void graph_ddp_step(benchmark::State& state) {
  DdpSetup setup;
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g);
    setup.step();
  }
  for (auto _ : state) {
    g.replay();
    cuda::synchronize(setup.device);
  }
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs)
      if (run.run_type == Run::RT_Iteration && run.iterations > 0)
        times_[run.benchmark_name()] = {run.GetAdjustedRealTime(), run.GetAdjustedCPUTime()};
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nCUDA graphs on an emulated device: eager / graph (> 1: the graph is cheaper)\n");
    std::printf("  %-16s %10s %16s\n", "", "wall time", "host CPU time");
    for (const auto& [name, t] : times_) {
      if (name.rfind("eager_", 0) != 0) continue;
      auto graph = times_.find("graph_" + name.substr(6));
      if (graph == times_.end()) continue;
      std::printf("  %-16s %10.2f %16.2f\n", name.substr(6).c_str(), t.first / graph->second.first,
                  t.second / graph->second.second);
    }
  }

 private:
  std::map<std::string, std::pair<double, double>> times_;  // {wall, this thread's CPU} per iteration
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  const bool distributed = std::getenv("WORLD_SIZE") != nullptr;
  if (distributed) {
    ember::distributed::init_process_group("gloo");
    benchmark::RegisterBenchmark("eager_ddp_step", eager_ddp_step)->Iterations(kDdpSteps);
    benchmark::RegisterBenchmark("graph_ddp_step", graph_ddp_step)->Iterations(kDdpSteps);
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (distributed) ember::distributed::destroy_process_group();
  return 0;
}
