// ember's side of the GPU benchmarks: the cases bench/torch_gpu.py times in PyTorch, under
// the same names, shapes, dtypes and protocol, on cuda:0 in the same gpu-run, so that
// bench/gpu_ratios.py can print ember / PyTorch per case.
//
//   bench_gpu [--emulated] [--only NAME[,NAME...]]
//
// Protocol (torch_gpu.py's time_us): `warmup` calls, synchronize, then 5 runs of `iters`
// calls each between two timing events recorded on the current stream; the median of the
// 5 per-call times. One line per case: `ember <name> <us> us [extra]`, or
// `ember <name> failed: <error>` (the remaining cases still run; the exit status is 1).
// small_add_host is the issuing thread's wall clock per call (the launch overhead).
//
// Without a GPU (no driver device) or with --emulated it runs on one emulated device; the
// header says "backend: emulated" and the iteration counts are divided by 10 (at least 3)
// so a dry run stays short: those numbers time the emulation on host threads, not a GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/charlm_model.h"
#include "../examples/train_model.h"
#include "bench_args.h"
#include "ember/ember.h"

namespace cuda = ember::cuda;
namespace nn = ember::nn;
using ember::Tensor;

namespace {

const ember::Device kDev(ember::kCUDA, 0);
const ember::TensorOptions kOn = ember::TensorOptions().device(kDev);
int g_iter_divisor = 1;
bool g_emulated = false;
int g_failures = 0;
std::set<std::string> g_only, g_seen;  // --only's names; every case name (to reject unknown ones)

int scaled(int iters) { return std::max(3, iters / g_iter_divisor); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Microseconds per call of fn: median of 5 runs of `iters` calls, timed with CUDA events.
double time_us(const std::function<void()>& fn, int iters = 100, int warmup = 10) {
  iters = scaled(iters);
  for (int i = 0; i < warmup; ++i) fn();
  cuda::synchronize();
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    cuda::Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
    start.record();
    for (int i = 0; i < iters; ++i) fn();
    end.record();
    end.synchronize();
    runs.push_back(static_cast<double>(start.elapsed_time(end)) * 1000.0 / iters);
  }
  return median(runs);
}

/// The issuing thread's wall time per call (the queue drained after each run, untimed).
double host_us(const std::function<void()>& fn, int iters = 1000, int warmup = 10) {
  iters = scaled(iters);
  for (int i = 0; i < warmup; ++i) fn();
  cuda::synchronize();
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    auto t1 = std::chrono::steady_clock::now();
    cuda::synchronize();
    runs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  return median(runs);
}

/// Runs one case unless --only excludes it; prints its line, or its error.
void run_case(const std::string& name, const std::function<std::string(double&)>& body) {
  g_seen.insert(name);
  if (!g_only.empty() && !g_only.count(name)) return;
  try {
    double us = 0;
    std::string extra = body(us);
    std::printf("ember %-32s %12.2f us %s%s\n", name.c_str(), us, extra.c_str(), g_emulated ? " [emulated]" : "");
  } catch (const std::exception& e) {
    ++g_failures;
    std::printf("ember %-32s failed: %s\n", name.c_str(), e.what());
  }
  std::fflush(stdout);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double gbps(double bytes, double us) { return bytes / (us * 1e-6) / 1e9; }

using ModuleList = std::initializer_list<std::shared_ptr<nn::Module>>;

// bench_train's MLP.
std::shared_ptr<nn::Module> make_mlp() {
  return std::make_shared<nn::Sequential>(ModuleList{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10)});
}

/// A Fashion-MNIST-shaped classification step (batch 64 unless said): zero_grad, forward,
/// cross-entropy, backward, Adam(1e-3). With `amp`, PyTorch's mixed-precision recipe: the
/// forward pass and the loss under autocast(cuda, float16), the loss scaled by a GradScaler,
/// whose step unscales, checks for non-finite gradients and steps Adam.
struct ClassifierStep {
  std::shared_ptr<nn::Module> net;
  std::unique_ptr<ember::optim::Adam> adam;
  std::unique_ptr<ember::amp::GradScaler> scaler;
  Tensor x, y;
  ClassifierStep(std::shared_ptr<nn::Module> model, bool capturable, bool amp = false, int64_t batch = 64)
      : net(std::move(model)) {
    if (amp) scaler = std::make_unique<ember::amp::GradScaler>(kDev);
    net->to(kDev);
    adam =
        std::make_unique<ember::optim::Adam>(net->parameters(), ember::optim::AdamOptions(1e-3).capturable(capturable));
    x = ember::rand({batch, 1, 28, 28}, kOn);
    std::vector<int64_t> labels(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = i % 10;
    y = ember::tensor(labels).to(kDev);
  }
  void operator()() {
    adam->zero_grad();
    if (!scaler) {
      Tensor loss = nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      adam->step();
      return;
    }
    Tensor loss;
    {
      ember::autocast mixed(ember::kCUDA, ember::kFloat16);
      loss = nn::functional::cross_entropy(net->forward(x), y);
    }
    scaler->scale(loss).backward();
    scaler->step(*adam);
    scaler->update();
  }
};

void elementwise_cases() {
  double copy_gbps = 0;
  run_case("copy_d2d/64MiB", [&](double& us) {
    const int64_t n = int64_t{16} << 20;  // 64 MiB of float32
    Tensor src = ember::rand({n}, kOn), dst = ember::empty({n}, kOn);
    us = time_us([&] { dst.copy_(src); });
    copy_gbps = gbps(2.0 * 4 * n, us);
    return fmt("%.1f GB/s", copy_gbps);
  });
  const int64_t n = int64_t{1} << 24;
  run_case("large_add/16777216", [&](double& us) {
    Tensor a = ember::rand({n}, kOn), b = ember::rand({n}, kOn);
    us = time_us([&] { (void)(a + b); });
    double bw = gbps(3.0 * 4 * n, us);
    return fmt("%.1f GB/s", bw) + (copy_gbps > 0 ? fmt(" %.1f%% of copy", 100.0 * bw / copy_gbps) : "");
  });
  run_case("small_add", [&](double& us) {
    Tensor a = ember::ones({16}, kOn), b = ember::ones({16}, kOn);
    us = time_us([&] { (void)(a + b); }, 1000);
    return std::string();
  });
  run_case("small_add_host", [&](double& us) {
    Tensor a = ember::ones({16}, kOn), b = ember::ones({16}, kOn);
    us = host_us([&] { (void)(a + b); });
    return std::string("wall clock per enqueue");
  });
  run_case("large_sum/16777216", [&](double& us) {
    Tensor a = ember::rand({n}, kOn);
    us = time_us([&] { (void)a.sum(); });
    return fmt("%.1f GB/s", gbps(4.0 * n, us));
  });
  run_case("softmax/64x784", [&](double& us) {
    Tensor x = ember::randn({64, 784}, kOn);
    us = time_us([&] { (void)x.softmax(1); });
    return std::string();
  });
}

void library_cases() {
  for (bool tf32 : {false, true}) {
    run_case(tf32 ? "matmul/1024/tf32_on" : "matmul/1024/tf32_off", [&](double& us) {
      ember::backends::cuda::matmul.allow_tf32 = tf32;
      Tensor a = ember::rand({1024, 1024}, kOn), b = ember::rand({1024, 1024}, kOn);
      us = time_us([&] { (void)a.matmul(b); });
      return fmt("%.2f TFLOP/s", 2.0 * 1024 * 1024 * 1024 / (us * 1e-6) / 1e12);
    });
  }
  ember::backends::cuda::matmul.allow_tf32 = false;  // PyTorch's default
  run_case("rfft/64x4096_plan_cached", [&](double& us) {
    Tensor x = ember::rand({64, 4096}, kOn);
    us = time_us([&] { (void)ember::fft::rfft(x); });  // warm-up calls fill the plan cache
    return std::string();
  });
  run_case("allocator_malloc_free/1MiB", [&](double& us) {
    us = time_us([&] { (void)ember::empty({int64_t{1} << 18}, kOn); }, 1000);
    return std::string();
  });
  run_case("event_record_sync", [&](double& us) {
    us = time_us(
        [&] {
          cuda::Event e;
          e.record();
          e.synchronize();
        },
        1000);
    return std::string();
  });
  run_case("stream_wait_event", [&](double& us) {
    cuda::Stream side(0);
    us = time_us(
        [&] {
          cuda::Event there, back;
          there.record();
          side.wait_event(there);
          back.record(side);
          back.synchronize();
        },
        1000);
    return std::string("record, side stream waits, record there, synchronize");
  });
  run_case("autograd_chain/100", [&](double& us) {
    Tensor leaf = ember::rand({1024}, kOn).requires_grad_();
    us = time_us(
        [&] {
          Tensor y = leaf;
          for (int i = 0; i < 100; ++i) y = y * 1.0001;
          y.sum().backward();
        },
        10);
    return std::string("forward + backward");
  });
}

void training_cases() {
  ember::backends::cudnn.allow_tf32 = true;  // PyTorch's defaults for the steps
  run_case("cnn_step/64", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(std::make_shared<examples::FashionCnn>(), false);
    us = time_us(std::ref(step), 20, 5);
    return std::string("examples/train's CNN, Adam");
  });
  run_case("cnn_step_amp/64", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(std::make_shared<examples::FashionCnn>(), false, /*amp=*/true);
    us = time_us(std::ref(step), 20, 5);
    return std::string("cnn_step/64 under autocast float16, GradScaler");
  });
  // The same steps at batch 1024, where a GPU's time goes to arithmetic rather than launches.
  run_case("cnn_step/1024", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(std::make_shared<examples::FashionCnn>(), false, false, 1024);
    us = time_us(std::ref(step), 20, 5);
    return std::string("examples/train's CNN, Adam, batch 1024");
  });
  run_case("cnn_step_amp/1024", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(std::make_shared<examples::FashionCnn>(), false, /*amp=*/true, 1024);
    us = time_us(std::ref(step), 20, 5);
    return std::string("cnn_step/1024 under autocast float16, GradScaler");
  });
  run_case("mlp_step/64", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(make_mlp(), false);
    us = time_us(std::ref(step), 50, 5);
    return std::string("784-256-128-10, Adam");
  });
  run_case("mlp_step_graph/64", [&](double& us) {
    ember::manual_seed(0);
    ClassifierStep step(make_mlp(), /*capturable=*/true);
    for (int i = 0; i < 3; ++i) step();  // the optimizer's state exists before capture
    cuda::CUDAGraph g;
    {
      cuda::graph capture(g);
      step();
    }
    us = time_us([&] { g.replay(); }, 50, 5);
    return std::string("CUDA graph replay of the step, Adam capturable");
  });
  run_case("transformer_step/8x128", [&](double& us) {
    ember::manual_seed(0);
    charlm::Config config;
    config.vocab_size = 96;
    auto net = std::make_shared<charlm::CharLM>(config);
    net->to(kDev);
    auto [decay, no_decay] = charlm::decay_groups(*net);
    ember::optim::AdamW adamw(decay, ember::optim::AdamWOptions(1e-3).weight_decay(0.1));
    adamw.add_param_group(no_decay, ember::optim::AdamWOptions(1e-3).weight_decay(0.0));
    Tensor x = (ember::rand({8, 128}, kOn) * 96).to(ember::kInt64);
    Tensor y = (ember::rand({8, 128}, kOn) * 96).to(ember::kInt64);
    us = time_us(
        [&] {
          adamw.zero_grad();
          Tensor loss = nn::functional::cross_entropy(net->forward(x).reshape({-1, 96}), y.reshape({-1}));
          loss.backward();
          nn::utils::clip_grad_norm_(net->parameters(), 1.0);
          adamw.step();
        },
        10, 3);
    return std::string("examples/charlm's model, AdamW, clip 1.0");
  });
}

/// The other modules of the spec's TF32 list, each one forward and backward (gradients of
/// the input and the parameters) of a loss that is the output's mean.
void family_cases() {
  run_case("lstm_step/35x20x200", [&](double& us) {
    ember::manual_seed(0);
    nn::LSTM lstm(200, 200, /*num_layers=*/2);
    lstm.to(kDev);
    ember::optim::SGD sgd(lstm.parameters(), ember::optim::SGDOptions(0.1));
    Tensor x = ember::randn({35, 20, 200}, kOn);
    us = time_us(
        [&] {
          sgd.zero_grad();
          Tensor out = lstm.forward(x).first;
          (out * out).mean().backward();
          sgd.step();
        },
        20, 3);
    return std::string("2-layer LSTM 200, sequence 35, batch 20, SGD");
  });
  run_case("conv1d/32x64x1024_k5", [&](double& us) {
    ember::manual_seed(0);
    nn::Conv1d conv(64, 128, 5, 1, 2);
    conv.to(kDev);
    Tensor x = ember::randn({32, 64, 1024}, kOn).requires_grad_();
    us = time_us([&] { conv.forward(x).mean().backward(); }, 20, 3);
    return std::string("64 -> 128 channels, padding 2, forward + backward");
  });
  run_case("conv3d/4x16x16x32x32_k3", [&](double& us) {
    ember::manual_seed(0);
    nn::Conv3d conv(16, 16, 3, 1, 1);
    conv.to(kDev);
    Tensor x = ember::randn({4, 16, 16, 32, 32}, kOn).requires_grad_();
    us = time_us([&] { conv.forward(x).mean().backward(); }, 20, 3);
    return std::string("16 -> 16 channels, padding 1, forward + backward");
  });
  run_case("grid_sample/32x16x64x64", [&](double& us) {
    ember::manual_seed(0);
    Tensor x = ember::randn({32, 16, 64, 64}, kOn).requires_grad_();
    // A small rotation and shift per image.
    Tensor theta = (ember::tensor(std::vector<float>{0.98f, -0.17f, 0.05f, 0.17f, 0.98f, -0.03f}).reshape({1, 2, 3}) +
                    0.01 * ember::randn({32, 2, 3}))
                       .to(kDev)
                       .requires_grad_();
    us = time_us(
        [&] {
          Tensor grid = nn::functional::affine_grid(theta, {32, 16, 64, 64});
          nn::functional::grid_sample(x, grid).mean().backward();
        },
        20, 3);
    return std::string("affine_grid + bilinear grid_sample, forward + backward");
  });
}

}  // namespace

constexpr const char* kUsage = "usage: bench_gpu [--emulated] [--only NAME[,NAME...]] [--help]\n";

int main(int argc, char** argv) {
  bool emulated = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--emulated")) {
      emulated = true;
    } else if (!std::strcmp(argv[i], "--only")) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gpu: --only needs a value\n%s", kUsage);
        return 2;
      }
      std::stringstream names(argv[++i]);
      for (std::string name; std::getline(names, name, ',');) g_only.insert(name);
    } else {
      other_argument("bench_gpu", argv[i], kUsage);
    }
  }
  try {
    if (emulated || !cuda::driver_is_available()) {
      cuda::emulate(1, size_t{4} << 30);
      g_iter_divisor = 10;
      g_emulated = true;
    }
    const std::string backend = cuda::backend_name();
    std::printf("# ember bench_gpu on cuda:0: %s, backend: %s%s\n", cuda::get_device_name(0).c_str(), backend.c_str(),
                backend == "emulated" ? " (host threads, iterations / 10: not GPU numbers)" : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: no cuda device: %s\n", e.what());
    return 1;
  }
  std::fflush(stdout);
  elementwise_cases();
  library_cases();
  training_cases();
  family_cases();
  for (const std::string& name : g_only) {
    if (!g_seen.count(name)) {
      std::fprintf(stderr, "bench_gpu: --only: no case named '%s'\n", name.c_str());
      return 2;
    }
  }
  return g_failures == 0 ? 0 : 1;
}
