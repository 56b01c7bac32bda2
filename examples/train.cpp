// A device-agnostic training run: a small CNN on Fashion-MNIST, written as the spec's
// "Best practices / Device-agnostic code" writes it in Python.
//
//   train [--epochs 2] [--batch-size 64] [--lr 0.001] [--device DEV] [--disable-cuda]
//         [--checkpoint out.safetensors] [--resume] [--no-tf32] [--seed 0] [--workers 2]
//         [--data /usr/share/datasets/fashion-mnist] [--limit N] [--memory-snapshot out.json]
//         [--ddp] [--data-parallel] [--lr-step EPOCHS] [--lr-gamma 0.1] [--cuda-graphs] [--amp] [--help]
//
// The device: --device if given; else a GPU if there is one; else an emulated cuda device;
// --disable-cuda forces the cpu. Batches are pinned by the DataLoader and copied with
// non_blocking. --checkpoint saves the model and the optimizer after every epoch, in one
// safetensors file (the epoch in its metadata): the model's state dict under its own names
// and Adam's (its step counts, moments and options) under "optimizer." + its names, so
// that one file is the whole checkpoint and the model's keys stay as a module's. --resume
// first loads it and continues after that epoch with both restored, Adam's learning rate
// included (a checkpoint without "optimizer." keys restarts the optimizer, and says so), and
// with the generators' states (dropout's and the shuffling's, under "rng."), so a resumed run
// continues as the uninterrupted one.
// --lr-step N decays the learning rate by --lr-gamma every N epochs (optim::StepLR, stepped
// after each epoch); its state is saved in the checkpoint under "scheduler." and --resume
// restores it, so the schedule goes on where it stopped. A checkpoint without "scheduler."
// keys (made without --lr-step, or before they were saved) still loads: the schedule then
// starts afresh from the checkpoint's learning rate, and the run says so.
// --limit trains on the first N batches of each epoch (a quick check); --eval-limit evaluates
// on the first N batches of the test set (the accuracy printed is then theirs).
// --memory-snapshot records the caching allocator's history (with C++ stacks) from the start
// and writes memory_snapshot_json() at the end of the first epoch, for ember-memviz; it needs
// a cuda device.
//
// --ddp, under `ember-run --nproc-per-node=N train --ddp`: DistributedDataParallel over the
// N ranks (gloo), each on its own device (cuda:LOCAL_RANK; emulated when there is no GPU),
// each reading its share of every epoch through a DistributedSampler, with --batch-size
// split between them (batch-size / N per rank), so that an update averages the same
// number of images as one process's. Rank 0 alone evaluates, prints and checkpoints.
//
// --cuda-graphs captures a whole training step (forward, backward, Adam's step with
// capturable=True) in a CUDA graph after one eager step, and replays it for every batch
// of the full batch size, with the batch copied into the graph's static input and target
// (PyTorch's "whole network capture"); a smaller last batch takes an eager step.
// --data-parallel splits each batch over every cuda device of the process with
// nn::DataParallel (with no GPU and no EMBER_EMULATED_DEVICES, over 2 emulated devices).
// --amp trains with automatic mixed precision: the forward pass and the loss under
// ember::autocast (float16 on a cuda device, bfloat16 on the cpu), the loss scaled by an
// amp::GradScaler (float16 only: bfloat16 has float32's range and needs none), whose state
// --checkpoint saves under "scaler." and --resume restores. The weights, the optimizer and
// the evaluation stay in float32. With --cuda-graphs the whole mixed-precision step is
// captured: the capturable Adam skips an overflowed step on the device.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "ember/data.h"
#include "ember/ember.h"
#include "example_checkpoint.h"
#include "example_flags.h"
#include "example_setup.h"
#include "train_model.h"

using namespace ember;

namespace {

// The checkpoint's keys of the optimizer's state dict start with this.
constexpr const char* kOptimizerPrefix = "optimizer.";
// ... and those of the learning-rate scheduler's (--lr-step) with this.
constexpr const char* kSchedulerPrefix = "scheduler.";
// ... and those of the gradient scaler's (--amp) with this.
constexpr const char* kScalerPrefix = "scaler.";
// ... and the generators' states: "rng.cpu", "rng.cuda" (the training device's), "rng.shuffle".
constexpr const char* kRngPrefix = "rng.";

struct Args : examples::CommonArgs {
  int epochs = 2;
  int64_t limit = -1;
  int64_t eval_limit = -1;
  std::string memory_snapshot;
  int64_t lr_step = 0;  // StepLR's step_size in epochs; 0: no scheduler
  double lr_gamma = 0.1;
  bool cuda_graphs = false;
  bool amp = false;

  Args() {
    batch_size = 64;
    lr = 1e-3;
    workers = 2;
    data = "/usr/share/datasets/fashion-mnist";
  }
};

constexpr const char* kUsage =
    "usage: train [--epochs N] [--batch-size N] [--lr X] [--device DEV] [--disable-cuda]\n"
    "             [--checkpoint FILE] [--resume] [--no-tf32] [--seed N] [--workers N]\n"
    "             [--data DIR] [--limit BATCHES] [--eval-limit BATCHES] [--memory-snapshot FILE]\n"
    "             [--ddp] (under ember-run --nproc-per-node=N) [--data-parallel]\n"
    "             [--lr-step EPOCHS] [--lr-gamma X] [--cuda-graphs] [--amp] [--help]\n";

[[noreturn]] void usage(const std::string& problem) { examples::refuse("train", problem, kUsage); }

Args parse(int argc, char** argv) {
  Args args;
  examples::Flags flags(argc, argv, usage, kUsage);
  while (flags.next()) {
    if (examples::read_common_flag(flags, args)) continue;
    if (flags.is("--epochs")) flags.read(args.epochs);
    else if (flags.is("--limit")) flags.read(args.limit);
    else if (flags.is("--eval-limit")) flags.read(args.eval_limit);
    else if (flags.is("--memory-snapshot")) flags.read(args.memory_snapshot);
    else if (flags.is("--lr-step")) flags.read(args.lr_step);
    else if (flags.is("--lr-gamma")) flags.read(args.lr_gamma);
    else if (flags.is("--cuda-graphs")) args.cuda_graphs = true;
    else if (flags.is("--amp")) args.amp = true;
    else flags.unknown();
  }
  if (args.epochs < 0 || args.batch_size <= 0 || args.workers < 0 || args.lr_step < 0) usage("sizes must be positive");
  examples::check_common_flags(args, usage);
  if (args.cuda_graphs && (args.ddp || args.data_parallel))
    usage("--cuda-graphs captures one device's step: not with --ddp or --data-parallel");
  if (args.cuda_graphs && args.lr_step > 0)
    usage("--cuda-graphs bakes the learning rate into the graph: not with --lr-step");
  return args;
}

Device choose_device(const Args& args) {
  return examples::choose_device(args.disable_cuda, args.device, args.data_parallel);
}

examples::DdpRank init_ddp(const Args& args) { return examples::init_ddp(args.disable_cuda, args.batch_size, usage); }

using Network = examples::FashionCnn;

double test_accuracy(Network& net, data::DataLoader& loader, Device device, int64_t limit) {
  net.eval();
  NoGradGuard no_grad;
  Tensor correct = zeros({}, TensorOptions(kInt64).device(device));
  int64_t seen = 0, batches = 0;
  for (const data::Example& batch : loader) {
    if (limit >= 0 && batches++ >= limit) break;
    Tensor x = batch.data.to(device, /*non_blocking=*/true);
    Tensor y = batch.target.to(device, /*non_blocking=*/true);
    correct += net(x).argmax(1, false).eq(y).to(kInt64).sum();
    seen += y.size(0);
  }
  net.train();
  return seen ? 100.0 * static_cast<double>(correct.item<int64_t>()) / static_cast<double>(seen) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    examples::DdpRank ddp_rank;
    if (args.ddp) ddp_rank = init_ddp(args);
    const bool lead = ddp_rank.rank == 0;  // prints, evaluates and checkpoints
    Args local = args;
    if (args.ddp && local.device.empty() && !local.disable_cuda)
      local.device = "cuda:" + std::to_string(ddp_rank.local_rank);
    const Device device = choose_device(local);
    if (args.no_tf32) {
      backends::cuda::matmul.allow_tf32 = false;
      backends::cudnn.allow_tf32 = false;
    }
    if (lead) {
      std::cout << "device: " << device;
      if (device.is_cuda()) std::cout << " (" << cuda::backend_name() << " backend)";
      std::cout << ", TF32 " << (backends::cudnn.allow_tf32 ? "allowed" : "off");
      if (args.amp)
        std::cout << ", mixed precision (" << (device.is_cuda() ? "float16, loss scaling" : "bfloat16") << ")";
      if (args.ddp) std::cout << ", DistributedDataParallel on " << ddp_rank.world << " ranks (one device each)";
      std::cout << "\n";
    }

    if (!args.memory_snapshot.empty()) {
      if (!device.is_cuda())
        usage("--memory-snapshot records a cuda device's allocator; the device is " + device.str());
      cuda::record_memory_history(true);
    }
    // The checkpoint's metadata first: a file of another program is refused before the data
    // or its tensors are read. Epochs are counted as --epochs is, in an int; the loop's 64
    // bits count on past INT_MAX without overflow.
    int64_t first_epoch = 1;
    if (args.resume)
      first_epoch = examples::metadata_integer(args.checkpoint, "epoch", 0, std::numeric_limits<int>::max()) + 1;
    manual_seed(args.seed);
    data::FashionMNIST train_set(args.data, /*train=*/true);
    data::FashionMNIST test_set(args.data, /*train=*/false);
    const bool pin = device.is_cuda();
    data::DataLoaderOptions train_options = data::DataLoaderOptions()
                                                .batch_size(args.batch_size)
                                                .shuffle(true)
                                                .num_workers(args.workers)
                                                .pin_memory(pin)
                                                .seed(args.seed);
    // The shuffling draws from a generator of its own, whose state the checkpoint keeps.
    Generator shuffle_generator;
    shuffle_generator.manual_seed(args.seed);
    if (!args.ddp) train_options.generator(shuffle_generator);
    // --ddp: each rank reads its share of the epoch, batch-size / world images a step.
    std::optional<data::DistributedSampler> ddp_sampler;
    if (args.ddp) {
      ddp_sampler.emplace(train_set.size(), ddp_rank.world, ddp_rank.rank, /*shuffle=*/true, args.seed);
      train_options.shuffle(false).sampler(*ddp_sampler).batch_size(args.batch_size / ddp_rank.world);
    }
    data::DataLoader train_loader(train_set, train_options);
    data::DataLoader test_loader(test_set,
                                 data::DataLoaderOptions().batch_size(1000).num_workers(args.workers).pin_memory(pin));

    auto net = std::make_shared<Network>();
    // From the checkpoint, loaded once the optimizer and the scheduler exist.
    nn::StateDict optimizer_state, scheduler_state, scaler_state, rng_state;
    if (args.resume) {
      nn::StateDict model_state;
      for (const auto& [key, t] : load(args.checkpoint)) {
        if (key.rfind(kOptimizerPrefix, 0) == 0) {
          optimizer_state.insert(key.substr(std::strlen(kOptimizerPrefix)), t);
        } else if (key.rfind(kSchedulerPrefix, 0) == 0) {
          scheduler_state.insert(key.substr(std::strlen(kSchedulerPrefix)), t);
        } else if (key.rfind(kScalerPrefix, 0) == 0) {
          scaler_state.insert(key.substr(std::strlen(kScalerPrefix)), t);
        } else if (key.rfind(kRngPrefix, 0) == 0) {
          rng_state.insert(key.substr(std::strlen(kRngPrefix)), t);
        } else {
          model_state.insert(key, t);
        }
      }
      examples::load_checkpoint_part(args.checkpoint, "model", "train's network",
                                     [&] { net->load_state_dict(model_state); });
      if (lead) {
        std::cout << "resumed from " << args.checkpoint << " after epoch " << first_epoch - 1
                  << (optimizer_state.empty() ? " (no optimizer state in it: Adam starts afresh)" : "")
                  << (args.lr_step > 0 && scheduler_state.empty()
                          ? " (no scheduler state in it: StepLR starts afresh from its learning rate)"
                          : "")
                  << (args.lr_step == 0 && !scheduler_state.empty()
                          ? " (its scheduler state is not used without --lr-step)"
                          : "")
                  << "\n";
      }
    }
    net->to(device);  // Network().to(device=args.device)
    std::shared_ptr<nn::parallel::DistributedDataParallel> ddp;
    if (args.ddp) {  // starts from rank 0's weights
      nn::parallel::DDPOptions options;
      if (device.is_cuda()) options.device_ids({device.index()});
      ddp = std::make_shared<nn::parallel::DistributedDataParallel>(net, options);
    }
    // --data-parallel: the batch split over the chosen device, then every other cuda device.
    std::shared_ptr<nn::DataParallel> data_parallel;
    if (args.data_parallel) {
      const std::vector<int> device_ids = examples::data_parallel_devices(device, usage);
      data_parallel = std::make_shared<nn::DataParallel>(net, device_ids);
      std::cout << "DataParallel over " << device_ids.size() << " devices\n";
    }
    nn::Module& model = ddp             ? static_cast<nn::Module&>(*ddp)
                        : data_parallel ? static_cast<nn::Module&>(*data_parallel)
                                        : *net;
    if (args.cuda_graphs && !device.is_cuda())
      usage("--cuda-graphs needs a cuda device; the device is " + device.str());
    optim::Adam optimizer(net->parameters(), optim::AdamOptions(args.lr).capturable(args.cuda_graphs));
    // --cuda-graphs: the captured step and its static tensors.
    cuda::CUDAGraph step_graph;
    bool captured = false;
    Tensor static_x, static_y, static_loss;
    // As in PyTorch: the scheduler is made before either state is loaded (its construction
    // sets the learning rate of epoch 0); the optimizer's state brings back the learning
    // rate, the scheduler's its epoch and base learning rates.
    std::unique_ptr<optim::StepLR> scheduler;
    if (args.lr_step > 0) scheduler = std::make_unique<optim::StepLR>(optimizer, args.lr_step, args.lr_gamma);
    if (!optimizer_state.empty()) {  // to the parameters' device
      examples::load_checkpoint_part(args.checkpoint, "optimizer", "Adam over train's network",
                                     [&] { optimizer.load_state_dict(optimizer_state); });
    }
    if (scheduler && !scheduler_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "scheduler", "StepLR, --lr-step",
                                     [&] { scheduler->load_state_dict(scheduler_state); });
    }
    // --amp: float16 with loss scaling on a cuda device, bfloat16 (no scaling) on the cpu.
    const DType amp_dtype = device.is_cuda() ? kFloat16 : kBFloat16;
    amp::GradScaler scaler(device, 65536.0, 2.0, 0.5, 2000, /*enabled=*/args.amp && amp_dtype == kFloat16);
    if (scaler.is_enabled() && !scaler_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "scaler", "GradScaler, --amp",
                                     [&] { scaler.load_state_dict(scaler_state); });
    }
    // One step: forward (under autocast with --amp), backward of the (scaled) loss, the
    // optimizer's step (skipped by the scaler on an overflow: on the device with
    // --cuda-graphs, whose capturable Adam takes the scaler's flag, so the step captures).
    auto training_step = [&](const Tensor& x, const Tensor& y) {
      optimizer.zero_grad(/*set_to_none=*/true);
      Tensor loss;
      {
        // The cast cache is off in a captured step: a cast made outside it must not be reused.
        std::optional<autocast> mixed;
        if (args.amp) mixed.emplace(device.type(), amp_dtype, true, /*cache_enabled=*/!args.cuda_graphs);
        loss = nn::functional::cross_entropy(model.forward(x), y);  // float32 under autocast too
      }
      scaler.scale(loss).backward();  // as is when the scaler is disabled
      scaler.step(optimizer);
      scaler.update();
      return loss;
    };
    // Each device has its own generator; seeding again here starts the one dropout uses at
    // the same place on every device, so a run with TF32 off gives the same numbers on the
    // cpu and on a cuda device.
    manual_seed(args.seed + 1);
    // --resume: dropout's generators and the shuffling go on from the checkpointed run's
    // states, so the resumed epochs are the uninterrupted run's (a checkpoint without them
    // starts both from the seeds above).
    if (!rng_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "generator", "a train checkpoint", [&] {
        if (const Tensor* cpu_state = rng_state.find("cpu")) set_rng_state(*cpu_state);
        const Tensor* cuda_state = rng_state.find("cuda");
        if (cuda_state != nullptr && device.is_cuda()) cuda::set_rng_state(*cuda_state, device.index());
        if (const Tensor* shuffle_state = rng_state.find("shuffle")) shuffle_generator.set_state(*shuffle_state);
      });
    }

    for (int64_t epoch = first_epoch; epoch < first_epoch + args.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      Tensor total_loss = zeros({}, device);  // summed on the device: no sync per step
      int64_t images = 0, steps = 0;
      if (ddp_sampler) ddp_sampler->set_epoch(static_cast<uint64_t>(epoch));
      for (const data::Example& batch : train_loader) {
        if (args.limit >= 0 && steps >= args.limit) break;
        Tensor x = batch.data.to(device, /*non_blocking=*/true);
        Tensor y = batch.target.to(device, /*non_blocking=*/true);
        if (args.cuda_graphs && captured && y.size(0) == args.batch_size) {
          static_x.copy_(x, /*non_blocking=*/true);
          static_y.copy_(y, /*non_blocking=*/true);
          step_graph.replay();
          total_loss += static_loss.detach();
        } else {
          Tensor loss = training_step(x, y);
          total_loss += loss.detach();
          if (args.cuda_graphs && !captured && y.size(0) == args.batch_size) {
            // After this eager step (Adam's state exists now), capture the next ones.
            static_x = x.clone();
            static_y = y.clone();
            {
              cuda::graph capture(step_graph);  // recorded only: this batch has had its step
              static_loss = training_step(static_x, static_y);
            }
            captured = true;
          }
        }
        images += y.size(0);
        ++steps;
      }
      if (args.ddp) {  // every rank's mean loss and images
        distributed::all_reduce(total_loss, distributed::ReduceOp::AVG);
        Tensor count = full({}, images, TensorOptions(kInt64).device(device));
        distributed::all_reduce(count);
        images = count.item<int64_t>();
      }
      const double epoch_lr = optimizer.lr();
      if (scheduler) scheduler->step();  // after the epoch's optimizer steps, as PyTorch wants it
      const double train_loss = total_loss.item<float>() / static_cast<double>(std::max<int64_t>(steps, 1));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!lead) continue;
      const double accuracy = test_accuracy(*net, test_loader, device, args.eval_limit);
      std::cout << "epoch " << epoch << "  loss " << std::fixed << std::setprecision(4) << train_loss
                << "  test accuracy " << std::setprecision(2) << accuracy << "%  " << std::setprecision(0)
                << static_cast<double>(images) / seconds << " images/s";
      if (scheduler) std::cout << "  lr " << std::defaultfloat << std::setprecision(6) << epoch_lr;
      std::cout << std::endl;
      if (!args.memory_snapshot.empty() && epoch == first_epoch) {
        std::ofstream out(args.memory_snapshot);
        out << cuda::memory_snapshot_json();
        if (!out) throw ValueError("train: could not write the memory snapshot to " + args.memory_snapshot);
        std::cout << "memory snapshot: " << args.memory_snapshot << " (view: ember-memviz " << args.memory_snapshot
                  << " -o memory.html)\n";
      }
      if (!args.checkpoint.empty()) {
        nn::StateDict checkpoint = net->state_dict();
        for (const auto& [key, t] : optimizer.state_dict()) checkpoint.insert(kOptimizerPrefix + key, t);
        if (scheduler) {
          for (const auto& [key, t] : scheduler->state_dict()) checkpoint.insert(kSchedulerPrefix + key, t);
        }
        for (const auto& [key, t] : scaler.state_dict()) checkpoint.insert(kScalerPrefix + key, t);
        checkpoint.insert(std::string(kRngPrefix) + "cpu", get_rng_state());
        if (device.is_cuda()) checkpoint.insert(std::string(kRngPrefix) + "cuda", cuda::get_rng_state(device.index()));
        checkpoint.insert(std::string(kRngPrefix) + "shuffle", shuffle_generator.get_state());
        save(checkpoint, args.checkpoint, {{"epoch", std::to_string(epoch)}});
      }
    }
  } catch (const std::exception& err) {  // ember's errors, and any other a library throws
    std::cerr << "train: " << err.what() << "\n";
    return 1;
  }
  if (args.ddp) distributed::destroy_process_group();
  return 0;
}
