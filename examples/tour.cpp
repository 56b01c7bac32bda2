// The main job: a walk through PyTorch's "CUDA semantics" note, section by section,
// run with ember. On a machine without a GPU it turns on 4 emulated devices.
//
//   tour [--disable-cuda] [--help]
//   ember-run --nproc-per-node=2 tour   (the last section on 2 ranks)
#include <ember/ember.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "example_flags.h"

using namespace ember;

namespace {

void section(const std::string& title) { std::cout << "\n=== " << title << " ===\n"; }

// The spec's examples name GPUs 0, 1 and 2. On a machine with fewer, index i runs on
// device i % device_count() (the tour says so at start).
int gpu(int i) { return i % cuda::device_count(); }
Device cuda_device(int i) { return Device(kCUDA, gpu(i)); }

void device_placement() {
  section("Devices: placement follows the tensor, not the current device");
  Device cuda("cuda");
  Device cuda0("cuda:0");
  Device cuda2 = cuda_device(2);

  auto x = tensor({1., 2.}, cuda0);
  auto y = tensor({1., 2.}).cuda();
  std::cout << "x.device is " << x.device().repr() << "\n";
  std::cout << "y.device is " << y.device().repr() << "\n";
  {
    cuda::DeviceGuard guard(gpu(1));
    auto a = tensor({1., 2.}, cuda);
    auto b = tensor({1., 2.}).cuda();
    auto b2 = tensor({1., 2.}).to(cuda);
    std::cout << "inside DeviceGuard(1): a " << a.device() << ", b " << b.device() << ", b2 " << b2.device() << "\n";
    auto c = a + b;
    std::cout << "c = a + b is on " << c.device() << ": " << c << "\n";
    auto z = x + y;
    std::cout << "z = x + y is on " << z.device() << " (x and y live there)\n";
    auto d = randn({2}, cuda2);
    auto e = randn({2}).to(cuda2);
    auto f = randn({2}).cuda(cuda2);
    std::cout << "d, e, f are on " << d.device() << ", " << e.device() << ", " << f.device() << "\n";
  }
  try {
    auto bad = tensor({1., 2.}, "cuda:0") + tensor({1., 2.}, cuda_device(1));
  } catch (const DeviceError& err) {
    std::cout << "cross-device op refused: " << err.what() << "\n";
  }
  auto moved = tensor({1., 2.}, "cuda:0").to(cuda_device(1));
  std::cout << "copies may cross devices: " << moved << "\n";
}

void asynchronous_execution() {
  section("Asynchronous execution and event timing");
  cuda::Event start_event(true), end_event(true);
  start_event.record();
  cuda::sleep(std::chrono::milliseconds(20));  // work the host does not wait for
  auto a = randn({256, 256}, "cuda");
  auto b = a.matmul(a);
  end_event.record();
  std::cout << "after enqueueing, end_event.query() = " << std::boolalpha << end_event.query() << "\n";
  cuda::synchronize();  // wait for the events to be recorded
  std::cout << "after synchronize, end_event.query() = " << end_event.query() << "\n";
  std::cout << "elapsed_time = " << start_event.elapsed_time(end_event) << " ms (includes a 20 ms sleep kernel)\n";
  try {
    cuda::Event plain;
    plain.record();
    plain.elapsed_time(end_event);
  } catch (const ValueError& err) {
    std::cout << "elapsed_time without timing: " << err.what() << "\n";
  }
}

void streams() {
  section("CUDA streams");
  Device cuda("cuda");
  cuda::Stream s;  // a new stream on the current device
  auto A = empty({100, 100}, cuda).normal_(0.0, 1.0);
  // The spec's incorrect example: sum() on s may start before normal_() finishes.
  if (cuda::sanitizer::is_enabled()) {
    // EMBER_CUDA_SANITIZER=1 (or warn) catches it: run the incorrect version once.
    try {
      cuda::StreamGuard guard(s);
      Tensor racy = sum(A);
      std::cout << "the stream sanitizer (warn mode) printed the race to stderr\n";
    } catch (const DataRaceError& e) {
      std::cout << "the stream sanitizer caught the incorrect version:\n" << e.what();
    }
  } else {
    std::cout << "(run with EMBER_CUDA_SANITIZER=1 to see the incorrect version caught)\n";
  }
  // The fix: make s wait for the current stream first.
  s.wait_stream(cuda::current_stream());
  Tensor B;
  {
    cuda::StreamGuard guard(s);
    B = sum(A);
    A.record_stream(s);
  }
  // B was computed on s: the current stream must wait for s before it reads B.
  cuda::current_stream().wait_stream(s);
  std::cout << "current stream inside StreamGuard was s; outside it is the default again: "
            << (cuda::current_stream() == cuda::default_stream()) << "\n";
  std::cout << "sum(A) computed on s after wait_stream: " << B.item<float>() << " (matches " << A.sum().item<float>()
            << ")\n";
  auto [least, greatest] = cuda::Stream::priority_range();
  cuda::Stream high(0, greatest);
  std::cout << "priority range {" << least << ", " << greatest << "}, new stream priority " << high.priority() << "\n";
}

void memory_management() {
  section("Memory management: the caching allocator");
  cuda::empty_cache();
  size_t before = cuda::memory_allocated();
  {
    auto t = empty({1024, 1024}, "cuda");  // 4 MiB
    std::cout << "memory_allocated: " << cuda::memory_allocated() - before
              << " bytes more while a 4 MiB tensor lives\n";
  }
  std::cout << "after it dies: allocated " << cuda::memory_allocated() - before << " more, reserved "
            << cuda::memory_reserved() << " (cached for reuse)\n";
  cuda::empty_cache();
  std::cout << "after empty_cache: reserved " << cuda::memory_reserved() << "\n";
  auto stats = cuda::memory_stats();
  std::cout << "memory_stats has " << stats.size()
            << " keys; allocation.all.allocated = " << stats["allocation.all.allocated"] << "\n";
  auto [free_bytes, total] = cuda::mem_get_info();
  std::cout << "mem_get_info: " << free_bytes << " free of " << total << "\n";
}

void tf32() {
  section("TensorFloat-32 (TF32)");
  Device cuda("cuda");
  const int64_t n = 1024;  // the spec uses 10240 on a GA100; scaled down here
  auto a_full = randn({n, n}, TensorOptions(kFloat64).device(cuda));
  auto b_full = randn({n, n}, TensorOptions(kFloat64).device(cuda));
  auto ab_full = a_full.matmul(b_full);
  double mean = ab_full.abs().mean().item<double>();
  auto a = a_full.to(kFloat32), b = b_full.to(kFloat32);
  backends::cuda::matmul.allow_tf32 = true;
  auto ab_tf32 = a.matmul(b);
  double err_tf32 = (ab_tf32.to(kFloat64) - ab_full).abs().max().item<double>();
  backends::cuda::matmul.allow_tf32 = false;
  auto ab_fp32 = a.matmul(b);
  double err_fp32 = (ab_fp32.to(kFloat64) - ab_full).abs().max().item<double>();
  backends::cuda::matmul.allow_tf32 = true;
  std::cout << "mean |ab| = " << mean << "\n";
  std::cout << "TF32 on : max error " << err_tf32 << ", relative " << err_tf32 / mean << "\n";
  std::cout << "TF32 off: max error " << err_fp32 << ", relative " << err_fp32 / mean << "\n";
  std::cout << "float32 matmul precision is now \"" << get_float32_matmul_precision() << "\"\n";
}

void fft_plan_cache() {
  section("cuFFT plan cache");
  auto& cache = backends::cuda::cufft_plan_cache;
  cache.clear();
  std::cout << "max_size " << cache.max_size() << ", size " << cache.size() << "\n";
  auto x = randn({8, 100}, "cuda");
  auto X = fft::fft(x);
  auto y = fft::ifft(X);
  std::cout << "fft then ifft round trip close: " << allclose(y, x.to(kComplex64), 1e-4, 1e-5) << "\n";
  fft::rfft(randn({4, 64}, "cuda"));
  std::cout << "plans cached after three transforms of two geometries and directions: " << cache.size() << "\n";
  backends::cuda::cufft_plan_cache[gpu(1)].set_max_size(10);
  {
    cuda::DeviceGuard guard(gpu(1));
    std::cout << "device 1's cache max_size through DeviceGuard(1): " << backends::cuda::cufft_plan_cache.max_size()
              << "\n";
  }
  cache.set_max_size(0);
  fft::fft(x);
  std::cout << "with max_size 0, FFTs still work and the cache holds " << cache.size() << " plans\n";
  cache.set_max_size(4096);
}

void device_agnostic(bool disable_cuda) {
  section("Best practices: device-agnostic code");
  Device device = (!disable_cuda && cuda::is_available()) ? Device("cuda") : Device("cpu");
  std::cout << "args.device = " << device << "\n";
  auto x = empty({8, 42}, device);
  std::cout << "x = empty({8, 42}, args.device) is on " << x.device() << "\n";
  if (disable_cuda) {
    auto y_cpu = empty({2}).new_full({3, 2}, 0.3);
    std::cout << "with --disable-cuda nothing touches cuda; new_full on the cpu:\n" << y_cpu << "\n";
    return;
  }

  std::cout << "Outside device is " << cuda::current_device() << "\n";
  {
    cuda::DeviceGuard guard(gpu(1));
    std::cout << "Inside device is " << cuda::current_device() << "\n";
  }
  std::cout << "Outside device is still " << cuda::current_device() << "\n";

  auto x_cpu = empty({2});
  auto x_gpu = empty({2}, Device("cuda"));
  auto x_cpu_long = empty({2}, kInt64);
  std::cout << "y_cpu = x_cpu.new_full({3, 2}, 0.3):\n" << x_cpu.new_full({3, 2}, 0.3) << "\n";
  std::cout << "y_gpu = x_gpu.new_full({3, 2}, -5):\n" << x_gpu.new_full({3, 2}, -5) << "\n";
  std::cout << "y_cpu_long = x_cpu_long.new_tensor({{1, 2, 3}}):\n" << x_cpu_long.new_tensor({{1, 2, 3}}) << "\n";
  auto x2_cpu = empty({2, 3});
  auto x2_gpu = empty({2, 3}, Device("cuda"));
  std::cout << "ones_like(x_cpu):\n" << ones_like(x2_cpu) << "\nzeros_like(x_gpu):\n" << zeros_like(x2_gpu) << "\n";
}

// The spec's `net = Network().to(device=args.device)` and its DataLoader loop, training a
// small network for a few steps on whatever args.device is (examples/train is the full run).
void device_agnostic_training(Device device) {
  section("Best practices: device-agnostic training");
  manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 4)});
  optim::SGD optimizer(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  net->to(device);  // the optimizer, made before, still updates the moved parameters
  std::cout << "net = Network().to(args.device):\n"
            << *net << "\nparameters on " << net->parameters()[0].device() << "\n";
  Tensor inputs = randn({256, 16});
  Tensor labels = inputs.slice(1, 0, 4).argmax(1, false);  // a learnable rule
  data::TensorDataset dataset(inputs, labels);
  data::DataLoader train_loader(dataset,
                                data::DataLoaderOptions().batch_size(32).shuffle(true).pin_memory(device.is_cuda()));
  for (int epoch = 0; epoch < 3; ++epoch) {
    Tensor total = zeros({}, device);
    for (const data::Example& batch : train_loader) {
      Tensor x = batch.data.to(device, /*non_blocking=*/true);
      Tensor y = batch.target.to(device, /*non_blocking=*/true);
      optimizer.zero_grad();
      Tensor loss = nn::functional::cross_entropy((*net)(x), y);
      loss.backward();
      optimizer.step();
      total += loss.detach();
    }
    std::cout << "epoch " << epoch << ": mean loss " << total.item<float>() / static_cast<float>(train_loader.size())
              << "\n";
  }
}

void pinned_memory() {
  section("Best practices: pinned memory and non_blocking copies");
  auto batch = randn({1024, 256}).pin_memory();
  std::cout << "pinned: " << std::boolalpha << batch.is_pinned() << "\n";
  cuda::Event done;
  auto on_gpu = batch.to(Device("cuda:0"), /*non_blocking=*/true);
  done.record();
  done.synchronize();
  std::cout << "non_blocking copy from pinned memory arrived intact: " << equal(on_gpu.cpu(), batch) << "\n";
  auto stats = cuda::host_memory_stats();
  std::cout << "host_memory_stats: " << stats.size() << " keys\n";

  // A DataLoader with pin_memory returns batches in pinned memory, ready for non_blocking copies.
  data::TensorDataset dataset(randn({256, 16}), arange(256));
  data::DataLoader train_loader(dataset, data::DataLoaderOptions().batch_size(64).num_workers(2).pin_memory(true));
  int64_t rows = 0;
  bool all_pinned = true;
  for (const data::Example& batch : train_loader) {
    all_pinned = all_pinned && batch.data.is_pinned();
    auto x = batch.data.to(Device("cuda:0"), /*non_blocking=*/true);
    rows += x.size(0);
  }
  cuda::synchronize();
  std::cout << "DataLoader(pin_memory=true): " << train_loader.size() << " batches, " << rows
            << " rows, every batch pinned: " << all_pinned << "\n";
}

void backward_streams() {
  section("Stream semantics of backward passes");
  // Each backward op runs on the stream its forward op ran on: the forward runs on strm.
  cuda::Stream strm(0);
  auto x = randn({1000}, TensorOptions().device("cuda:0").requires_grad(true));
  auto forward = [&] {
    strm.wait_stream(cuda::current_stream(0));
    cuda::StreamGuard guard(strm);
    return (x * x).sum();
  };
  auto check = [&](const char* label) {
    // backward() made the calling stream wait for the gradient work: reading is safe here.
    NoGradGuard no_grad;
    std::cout << label << ": x.grad == 2 * x: " << std::boolalpha << x.grad().allclose(x * 2) << "\n";
    x.mutable_grad() = {};
  };

  // Safe: populating initial_grad and invoking backward are in the same stream context.
  auto loss = forward();
  {
    cuda::StreamGuard guard(strm);
    loss.backward(ones_like(loss));
    check("safe, same stream context");
  }

  // Unsafe (not run): initial_grad is populated on the default stream and consumed on
  // strm without synchronization, exactly as in PyTorch:
  //   auto initial_grad = ones_like(loss);
  //   { cuda::StreamGuard guard(strm); loss.backward(initial_grad); }
  std::cout << "unsafe: ones_like on the default stream, backward on strm without a wait (not run)\n";

  // Safe, with synchronization.
  loss = forward();
  auto initial_grad = ones_like(loss);
  strm.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(strm);
    initial_grad.record_stream(strm);
    loss.backward(initial_grad);
    check("safe, wait_stream + record_stream");
  }
}

// Beyond the spec: CUDA graphs (today's edition of the note).
void cuda_graphs() {
  section("CUDA Graphs: capture once, replay with one launch");
  auto static_in = zeros({4}, TensorOptions().device("cuda:0"));
  cuda::CUDAGraph g;
  Tensor static_out;
  {
    cuda::graph capture(g);  // on a side stream: the work is recorded, not run
    static_out = (static_in + 1) * 2;
    std::cout << "capturing: " << std::boolalpha << cuda::is_current_stream_capturing() << "\n";
  }
  for (double value : {1.0, 5.0}) {
    static_in.fill_(value);  // new inputs go into the static input
    g.replay();
    std::cout << "replay with input " << value << ": " << static_out << "\n";
  }
  // A synchronising call on a capturing stream is an error, as on a GPU.
  cuda::CUDAGraph bad;
  try {
    cuda::graph capture(bad);
    (void)static_in.sum().item<float>();
  } catch (const CudaError& e) {
    std::cout << "item() during capture: " << e.what() << "\n";
  }
}

// The spec's closing advice. Under ember-run (WORLD_SIZE set) every rank trains the same
// small model with DistributedDataParallel on its own emulated device; run alone, the
// section says how to launch it.
void distributed_data_parallel() {
  section("Use nn.parallel.DistributedDataParallel instead of multiprocessing or nn.DataParallel");
  std::cout << "One process per GPU: DistributedDataParallel averages gradients over the processes while\n"
               "backward runs (no GIL to share in Python, no replica threads in one process).\n";
  if (!std::getenv("WORLD_SIZE")) {
    std::cout << "To run this section for real, launch the tour with one process per device:\n"
                 "  ember-run --nproc-per-node=2 tour\n";
    return;
  }
  namespace dist = ember::distributed;
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const char* local = std::getenv("LOCAL_RANK");
  const int local_rank = gpu(local ? std::atoi(local) : rank);
  cuda::set_device(local_rank);
  manual_seed(static_cast<uint64_t>(rank));  // different initial weights: DDP takes rank 0's
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 1)});
  net->to(cuda_device(local_rank));
  nn::parallel::DistributedDataParallel ddp(net, nn::parallel::DDPOptions().device_ids({local_rank}));
  optim::SGD sgd(ddp.parameters(), optim::SGDOptions(0.05));
  Tensor x = randn({16, 8}), y = x.sum(1, /*keepdim=*/true);  // this rank's data (inputs moved by ddp)
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    sgd.zero_grad();
    Tensor loss = nn::functional::mse_loss(ddp(x), y.to(cuda_device(local_rank)));
    loss.backward();  // the all-reduce of the gradients overlaps the rest of backward
    sgd.step();
    (step == 0 ? first : last) = loss.item<float>();
  }
  // Every rank applied the same averaged gradients to the same weights: they still agree.
  Tensor w = net->parameters().front().detach().contiguous();
  std::vector<Tensor> all;
  for (int r = 0; r < world; ++r) all.push_back(empty_like(w));
  dist::all_gather(all, w);
  bool same = true;
  for (const Tensor& other : all) same = same && other.equal(w);
  std::cout << "rank " << rank << " of " << world << " on " << w.device() << ": loss " << first << " -> " << last
            << ", weights equal on every rank: " << std::boolalpha << same << std::endl;
  dist::destroy_process_group();
}

constexpr const char* kUsage =
    "usage: tour [--disable-cuda] [--help]\n"
    "       ember-run --nproc-per-node=2 tour   (the last section on 2 ranks)\n"
    "A walk through PyTorch's \"CUDA semantics\" note, section by section; --disable-cuda\n"
    "runs only its device-agnostic sections, on the cpu.\n";

[[noreturn]] void usage(const std::string& problem) { examples::refuse("tour", problem, kUsage); }

}  // namespace

int main(int argc, char** argv) {
  bool disable_cuda = false;
  examples::Flags flags(argc, argv, usage, kUsage);
  while (flags.next()) {
    if (flags.is("--disable-cuda")) disable_cuda = true;
    else flags.unknown();
  }
  if (disable_cuda) {
    device_agnostic(true);
    device_agnostic_training(Device(kCPU));
    return 0;
  }
  if (!std::getenv("EMBER_EMULATED_DEVICES") && !cuda::driver_is_available()) {
    std::cout << "No GPU found: running on 4 emulated CUDA devices (ember::cuda::emulate(4)).\n";
    cuda::emulate(4, size_t{2} << 30);
  }
  const char* rank = std::getenv("RANK");
  if (rank && std::atoi(rank) != 0) {  // under ember-run: rank 0 alone tours, every rank runs DDP
    distributed_data_parallel();
    return 0;
  }
  std::cout << "cuda backend: " << cuda::backend_name() << ", " << cuda::device_count() << " devices\n";
  if (cuda::device_count() < 3) {
    std::cout << "The spec's examples use GPUs 0-2; here GPU i means cuda:(i % " << cuda::device_count() << ").\n";
  }
  device_placement();
  asynchronous_execution();
  streams();
  memory_management();
  tf32();
  fft_plan_cache();
  device_agnostic(false);
  device_agnostic_training(Device("cuda"));
  pinned_memory();
  backward_streams();
  cuda_graphs();
  distributed_data_parallel();
  std::cout << "\nTour complete.\n";
  return 0;
}
