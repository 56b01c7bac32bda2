// A GPT-style character model trained on Debian's fortune cookies, device-agnostic as
// examples/train is (the spec's "Best practices / Device-agnostic code").
//
//   charlm [--steps 2000] [--batch-size 32] [--lr 0.002] [--device DEV] [--disable-cuda]
//          [--checkpoint FILE] [--resume] [--stop-after STEP] [--no-tf32] [--seed 0] [--workers 0]
//          [--data /usr/share/games/fortunes] [--context 128] [--width 128] [--layers 4] [--heads 4]
//          [--dropout 0.1] [--weight-decay 0.1] [--warmup 100] [--clip 1.0] [--log-every 100]
//          [--eval-batches 20] [--samples 3] [--sample-length 300] [--temperature 0.8] [--top-k 20]
//          [--ddp] [--data-parallel] [--amp] [--help]
//
// The model is examples/charlm_model.h's (4 pre-norm layers of width 128 with 4 heads by
// default, tied embeddings, dropout, causal attention). Training draws random windows of
// --context characters from the training files (data::Fortunes splits Debian's cookies by file:
// every tenth file is held out for validation) through a shuffling DataLoader, and steps
// AdamW (weight decay on matrices only: biases, norms and embeddings are in a group
// without it) after clipping the gradients' norm to --clip. The learning rate warms up
// linearly for --warmup steps, then follows a cosine down to a tenth of --lr at --steps
// (optim::LambdaLR, stepped after every optimizer step).
//
// Every --log-every steps a progress line prints the mean training loss since the last
// line, the validation loss (on --eval-batches fixed batches of held-out windows), the
// learning rate and the training throughput in tokens/s. At the end, --samples samples of
// --sample-length characters are drawn (temperature, top-k) after a newline.
//
// --checkpoint saves, at every progress line and at the end, the model's state dict, AdamW's
// (under "optimizer.") and the schedule's (under "scheduler."), the vocabulary (as
// "vocabulary.chars", the byte values) and the step (in the metadata). --resume loads them
// all and goes on from that step to --steps on the same schedule; the data loader skips the
// batches already seen, and the default generators' states (the cpu's and the training
// device's, under "rng.") are restored, so the resumed run, dropout included, continues as
// the uninterrupted run would.
// --stop-after N ends the run after step N, as if interrupted.
//
// --ddp, under `ember-run --nproc-per-node=N charlm --ddp`: DistributedDataParallel over N
// ranks (gloo), each on its own device, each drawing its share of the windows through a
// DistributedSampler with --batch-size / N windows a step. Rank 0 alone evaluates, prints,
// samples and checkpoints. --data-parallel splits each batch over every cuda device of the
// process with nn::DataParallel.
//
// --amp trains with automatic mixed precision: the forward pass and the loss under
// ember::autocast (float16 on a cuda device, bfloat16 on the cpu) and, in float16, the loss
// scaled by an amp::GradScaler whose unscale_ comes before the clipping; its state is saved
// under "scaler." and restored by --resume.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "charlm_model.h"
#include "ember/ember.h"
#include "example_checkpoint.h"
#include "example_flags.h"
#include "example_setup.h"

using namespace ember;

namespace {

constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kSchedulerPrefix = "scheduler.";
constexpr const char* kScalerPrefix = "scaler.";
constexpr const char* kRngPrefix = "rng.";  // the default generators' states: "rng.cpu", "rng.cuda"
constexpr const char* kVocabularyKey = "vocabulary.chars";

struct Args : examples::CommonArgs {
  int64_t steps = 2000;
  int64_t stop_after = -1;
  charlm::Config model;
  double weight_decay = 0.1;
  int64_t warmup = 100;
  double clip = 1.0;
  int64_t log_every = 100;
  int64_t eval_batches = 20;
  int64_t samples = 3;
  int64_t sample_length = 300;
  double temperature = 0.8;
  int64_t top_k = 20;
  bool amp = false;

  Args() {
    batch_size = 32;
    lr = 2e-3;
    data = data::Fortunes::kDefaultRoot;
  }
};

constexpr const char* kUsage =
    "usage: charlm [--steps N] [--batch-size N] [--lr X] [--device DEV] [--disable-cuda]\n"
    "              [--checkpoint FILE] [--resume] [--stop-after STEP] [--no-tf32] [--seed N]\n"
    "              [--workers N] [--data DIR] [--context N] [--width N] [--layers N] [--heads N]\n"
    "              [--dropout X] [--weight-decay X] [--warmup STEPS] [--clip X] [--log-every STEPS]\n"
    "              [--eval-batches N] [--samples N] [--sample-length N] [--temperature X] [--top-k N]\n"
    "              [--ddp] (under ember-run --nproc-per-node=N) [--data-parallel] [--amp] [--help]\n";

[[noreturn]] void usage(const std::string& problem) { examples::refuse("charlm", problem, kUsage); }

Args parse(int argc, char** argv) {
  Args args;
  args.model.dropout = 0.1;
  examples::Flags flags(argc, argv, usage, kUsage);
  while (flags.next()) {
    if (examples::read_common_flag(flags, args)) continue;
    if (flags.is("--steps")) flags.read(args.steps);
    else if (flags.is("--stop-after")) flags.read(args.stop_after);
    else if (flags.is("--context")) flags.read(args.model.context);
    else if (flags.is("--width")) flags.read(args.model.width);
    else if (flags.is("--layers")) flags.read(args.model.layers);
    else if (flags.is("--heads")) flags.read(args.model.heads);
    else if (flags.is("--dropout")) flags.read(args.model.dropout);
    else if (flags.is("--weight-decay")) flags.read(args.weight_decay);
    else if (flags.is("--warmup")) flags.read(args.warmup);
    else if (flags.is("--clip")) flags.read(args.clip);
    else if (flags.is("--log-every")) flags.read(args.log_every);
    else if (flags.is("--eval-batches")) flags.read(args.eval_batches);
    else if (flags.is("--samples")) flags.read(args.samples);
    else if (flags.is("--sample-length")) flags.read(args.sample_length);
    else if (flags.is("--temperature")) flags.read(args.temperature);
    else if (flags.is("--top-k")) flags.read(args.top_k);
    else if (flags.is("--amp")) args.amp = true;
    else flags.unknown();
  }
  if (args.steps < 0 || args.batch_size <= 0 || args.workers < 0 || args.warmup < 0 || args.log_every <= 0 ||
      args.eval_batches < 0 || args.samples < 0 || args.sample_length < 0 || args.top_k < 0)
    usage("sizes must be positive");
  if (args.model.context <= 0 || args.model.width <= 0 || args.model.layers < 0 || args.model.heads <= 0)
    usage("the model's sizes must be positive");
  if (!(args.temperature > 0)) usage("--temperature must be positive");
  examples::check_common_flags(args, usage);
  return args;
}

// What a checkpoint's model must have been made with to load.
constexpr const char* kModelFlags = "--context, --width, --layers and --heads as it was saved with";

// A checkpoint's "vocabulary.chars": byte values, each once.
data::CharVocabulary vocabulary_of(const std::string& checkpoint, const Tensor& saved) {
  std::string chars;
  for (int64_t c : saved.to(kInt64).to_vector<int64_t>()) {
    if (c < 0 || c > 255)
      throw ValueError(checkpoint + ": " + kVocabularyKey + " holds " + std::to_string(c) + ", not a byte");
    chars += static_cast<char>(c);
  }
  return data::CharVocabulary::from_chars(chars);
}

Device choose_device(const Args& args) {
  return examples::choose_device(args.disable_cuda, args.device, args.data_parallel);
}

examples::DdpRank init_ddp(const Args& args) { return examples::init_ddp(args.disable_cuda, args.batch_size, usage); }

// Warmup, then a cosine from 1 down to 0.1 at `steps` (a factor of the base learning rate).
double schedule(int64_t step, int64_t warmup, int64_t steps) {
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, steps - warmup)));
  return 0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * progress));
}

double mean_loss(charlm::CharLM& model, const std::vector<data::Example>& batches, Device device) {
  if (batches.empty()) return std::nan("");
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Tensor total = zeros({}, device);
  for (const data::Example& b : batches) {
    Tensor logits = model.forward(b.data.to(device));
    total += nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), b.target.to(device).reshape({-1}));
  }
  model.train(was_training);
  return total.item<float>() / static_cast<double>(batches.size());
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    examples::DdpRank ddp_rank;
    if (args.ddp) ddp_rank = init_ddp(args);
    const bool lead = ddp_rank.rank == 0;
    Args local = args;
    if (args.ddp && local.device.empty() && !local.disable_cuda)
      local.device = "cuda:" + std::to_string(ddp_rank.local_rank);
    const Device device = choose_device(local);
    if (args.no_tf32) {
      backends::cuda::matmul.allow_tf32 = false;
      backends::cudnn.allow_tf32 = false;
    }
    manual_seed(args.seed);

    // The checkpoint's metadata first: a file of another program is refused before the
    // corpus or its tensors are read.
    constexpr int64_t kMaxStep = std::numeric_limits<int64_t>::max();
    const int64_t first_step = args.resume ? examples::metadata_integer(args.checkpoint, "step", 0, kMaxStep) : 0;
    // The corpus and, from a checkpoint, the state to resume.
    data::Fortunes fortunes(args.data);
    data::CharVocabulary vocabulary = fortunes.vocabulary();
    nn::StateDict model_state, optimizer_state, scheduler_state, scaler_state, rng_state;
    if (args.resume) {
      bool has_vocabulary = false;
      for (const auto& [key, t] : load(args.checkpoint)) {
        if (key.rfind(kOptimizerPrefix, 0) == 0) optimizer_state.insert(key.substr(std::strlen(kOptimizerPrefix)), t);
        else if (key.rfind(kSchedulerPrefix, 0) == 0)
          scheduler_state.insert(key.substr(std::strlen(kSchedulerPrefix)), t);
        else if (key.rfind(kScalerPrefix, 0) == 0) scaler_state.insert(key.substr(std::strlen(kScalerPrefix)), t);
        else if (key.rfind(kRngPrefix, 0) == 0) rng_state.insert(key.substr(std::strlen(kRngPrefix)), t);
        else if (key == kVocabularyKey) {
          vocabulary = vocabulary_of(args.checkpoint, t);
          has_vocabulary = true;
        } else {
          model_state.insert(key, t);
        }
      }
      if (!has_vocabulary)
        throw ValueError(args.checkpoint + " has no " + kVocabularyKey + ": it is not a checkpoint of charlm");
    }
    const Tensor train_tokens = vocabulary.encode(fortunes.train_text());
    const Tensor val_tokens = vocabulary.encode(fortunes.validation_text());
    data::CharDataset train_set(train_tokens, args.model.context);
    data::CharDataset val_set(val_tokens, args.model.context);

    charlm::Config config = args.model;
    config.vocab_size = vocabulary.size();
    auto net = std::make_shared<charlm::CharLM>(config);
    if (args.resume) {
      examples::load_checkpoint_part(args.checkpoint, "model", kModelFlags, [&] { net->load_state_dict(model_state); });
    }
    net->to(device);
    if (lead) {
      int64_t count = 0;
      for (const Tensor& p : net->parameters()) count += p.numel();
      std::cout << "device: " << device;
      if (device.is_cuda()) std::cout << " (" << cuda::backend_name() << " backend)";
      std::cout << ", TF32 " << (backends::cuda::matmul.allow_tf32 ? "allowed" : "off");
      if (args.amp)
        std::cout << ", mixed precision (" << (device.is_cuda() ? "float16, loss scaling" : "bfloat16") << ")";
      if (args.ddp) std::cout << ", DistributedDataParallel on " << ddp_rank.world << " ranks";
      std::cout << "\ncorpus: " << fortunes.train_files().size() << " files (" << train_tokens.numel()
                << " characters) for training, " << fortunes.validation_files().size() << " (" << val_tokens.numel()
                << ") for validation; " << vocabulary.size() << " distinct characters\n"
                << "model: " << config.layers << " layers, width " << config.width << ", " << config.heads
                << " heads, context " << config.context << ", " << count << " parameters\n";
      if (args.resume) std::cout << "resumed from " << args.checkpoint << " after step " << first_step << "\n";
    }

    std::shared_ptr<nn::parallel::DistributedDataParallel> ddp;
    if (args.ddp) {
      nn::parallel::DDPOptions options;
      if (device.is_cuda()) options.device_ids({device.index()});
      ddp = std::make_shared<nn::parallel::DistributedDataParallel>(net, options);
    }
    std::shared_ptr<nn::DataParallel> data_parallel;
    if (args.data_parallel) {
      const std::vector<int> device_ids = examples::data_parallel_devices(device, usage);
      data_parallel = std::make_shared<nn::DataParallel>(net, device_ids);
      if (lead) std::cout << "DataParallel over " << device_ids.size() << " devices\n";
    }
    nn::Module& model = ddp             ? static_cast<nn::Module&>(*ddp)
                        : data_parallel ? static_cast<nn::Module&>(*data_parallel)
                                        : *net;

    auto [decay, no_decay] = charlm::decay_groups(*net);
    optim::AdamW optimizer(decay, optim::AdamWOptions(args.lr).betas({0.9, 0.95}).weight_decay(args.weight_decay));
    optimizer.add_param_group(no_decay, optim::AdamWOptions(args.lr).betas({0.9, 0.95}).weight_decay(0.0));
    const int64_t warmup = args.warmup, steps = args.steps;
    optim::LambdaLR scheduler(optimizer, [warmup, steps](int64_t s) { return schedule(s, warmup, steps); });
    if (!optimizer_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "optimizer", kModelFlags,
                                     [&] { optimizer.load_state_dict(optimizer_state); });
    }
    if (!scheduler_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "scheduler", "LambdaLR",
                                     [&] { scheduler.load_state_dict(scheduler_state); });
    }
    // --amp: float16 with loss scaling on a cuda device, bfloat16 (no scaling) on the cpu.
    const DType amp_dtype = device.is_cuda() ? kFloat16 : kBFloat16;
    amp::GradScaler scaler(device, 65536.0, 2.0, 0.5, 2000, /*enabled=*/args.amp && amp_dtype == kFloat16);
    if (scaler.is_enabled() && !scaler_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "scaler", "GradScaler, --amp",
                                     [&] { scaler.load_state_dict(scaler_state); });
    }

    // Fixed validation batches: the same windows at every progress line.
    std::vector<data::Example> val_batches;
    if (lead) {
      data::DataLoader val_loader(
          val_set, data::DataLoaderOptions().batch_size(args.batch_size).shuffle(true).seed(args.seed + 1));
      for (const data::Example& b : val_loader) {
        if (static_cast<int64_t>(val_batches.size()) >= args.eval_batches) break;
        val_batches.push_back(b);
      }
    }
    data::DataLoaderOptions train_options = data::DataLoaderOptions()
                                                .batch_size(args.batch_size)
                                                .shuffle(true)
                                                .num_workers(args.workers)
                                                .pin_memory(device.is_cuda())
                                                .drop_last(true)
                                                .seed(args.seed);
    std::optional<data::DistributedSampler> ddp_sampler;
    if (args.ddp) {
      ddp_sampler.emplace(train_set.size(), ddp_rank.world, ddp_rank.rank, true, args.seed);
      train_options.shuffle(false).sampler(*ddp_sampler).batch_size(args.batch_size / ddp_rank.world);
    }
    data::DataLoader train_loader(train_set, train_options);
    // With drop_last, windows fewer than a batch make empty epochs: refuse rather than loop
    // over them forever waiting for a step.
    if (train_loader.size() == 0) {
      const size_t windows = ddp_sampler ? ddp_sampler->size() : train_set.size();
      usage("--batch-size " + std::to_string(args.batch_size) +
            (args.ddp ? " over " + std::to_string(ddp_rank.world) + " ranks is " +
                            std::to_string(train_options.batch_size()) + " windows a rank, more than the " +
                            std::to_string(windows) + " training windows of a rank"
                      : " is more than the " + std::to_string(windows) + " training windows") +
            " (" + std::to_string(train_tokens.numel()) + " characters, --context " +
            std::to_string(args.model.context) + "): not one full batch to train on");
    }
    manual_seed(args.seed + 1 + static_cast<uint64_t>(first_step));  // dropout's generator, on every device alike
    // --resume: the generators go on from the checkpointed run's states, so dropout draws the
    // masks the uninterrupted run would (a checkpoint without them starts from the seed above).
    if (!rng_state.empty()) {
      examples::load_checkpoint_part(args.checkpoint, "generator", "a charlm checkpoint", [&] {
        if (const Tensor* cpu_state = rng_state.find("cpu")) set_rng_state(*cpu_state);
        const Tensor* cuda_state = rng_state.find("cuda");
        if (cuda_state != nullptr && device.is_cuda()) cuda::set_rng_state(*cuda_state, device.index());
      });
    }

    auto save_checkpoint = [&](int64_t step) {
      nn::StateDict checkpoint = net->state_dict();
      for (const auto& [key, t] : optimizer.state_dict()) checkpoint.insert(kOptimizerPrefix + key, t);
      for (const auto& [key, t] : scheduler.state_dict()) checkpoint.insert(kSchedulerPrefix + key, t);
      for (const auto& [key, t] : scaler.state_dict()) checkpoint.insert(kScalerPrefix + key, t);
      Tensor chars = empty({vocabulary.size()}, kInt64);
      for (int64_t i = 0; i < vocabulary.size(); ++i)
        chars.data_ptr<int64_t>()[i] = static_cast<unsigned char>(vocabulary.chars()[static_cast<size_t>(i)]);
      checkpoint.insert(kVocabularyKey, chars);
      checkpoint.insert(std::string(kRngPrefix) + "cpu", get_rng_state());
      if (device.is_cuda()) checkpoint.insert(std::string(kRngPrefix) + "cuda", cuda::get_rng_state(device.index()));
      save(checkpoint, args.checkpoint, {{"step", std::to_string(step)}});
    };

    const int64_t last_step = args.stop_after >= 0 ? std::min(args.steps, args.stop_after) : args.steps;
    int64_t step = first_step;
    uint64_t epoch = 0;
    int64_t skip = first_step;  // batches already seen, when resuming
    Tensor interval_loss = zeros({}, device);
    int64_t interval_steps = 0;
    double interval_seconds = 0;
    while (step < last_step) {
      if (ddp_sampler) ddp_sampler->set_epoch(epoch);
      ++epoch;
      auto start = std::chrono::steady_clock::now();
      for (const data::Example& batch : train_loader) {
        if (skip > 0) {
          --skip;
          continue;
        }
        if (step >= last_step) break;
        Tensor x = batch.data.to(device, true), y = batch.target.to(device, true);
        optimizer.zero_grad();
        Tensor loss;
        {
          std::optional<autocast> mixed;
          if (args.amp) mixed.emplace(device.type(), amp_dtype);
          Tensor logits = model.forward(x);
          loss = nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
        }
        scaler.scale(loss).backward();  // as is when the scaler is disabled
        scaler.unscale_(optimizer);     // the clipping sees the true gradients
        if (args.clip > 0) nn::utils::clip_grad_norm_(net->parameters(), args.clip);
        scaler.step(optimizer);
        scaler.update();
        scheduler.step();
        interval_loss += loss.detach();
        ++interval_steps;
        ++step;
        if (step % args.log_every == 0 || step == last_step) {
          if (args.ddp) distributed::all_reduce(interval_loss, distributed::ReduceOp::AVG);
          const double train_loss = interval_loss.item<float>() / static_cast<double>(interval_steps);
          interval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const double tokens = static_cast<double>(interval_steps * args.batch_size * args.model.context);
          if (lead) {
            const double val_loss = mean_loss(*net, val_batches, device);
            std::cout << "step " << step << "/" << args.steps << "  loss " << std::fixed << std::setprecision(4)
                      << train_loss << "  val " << val_loss << "  lr " << std::defaultfloat << std::setprecision(4)
                      << optimizer.lr() << "  " << std::fixed << std::setprecision(0) << tokens / interval_seconds
                      << " tokens/s" << std::endl;
            if (!args.checkpoint.empty()) save_checkpoint(step);
          }
          interval_loss.zero_();
          interval_steps = 0;
          interval_seconds = 0;
          start = std::chrono::steady_clock::now();
        }
      }
    }

    if (lead && args.samples > 0) {
      std::cout << std::defaultfloat << std::setprecision(6) << "samples (temperature " << args.temperature
                << ", top-k " << args.top_k << "):\n";
      for (int64_t i = 0; i < args.samples; ++i) {
        Tensor prompt = vocabulary.encode("\n").view({1, 1}).to(device);
        Tensor out = charlm::generate(*net, prompt, args.sample_length, args.temperature, args.top_k);
        std::cout << "----\n" << vocabulary.decode(out.slice(1, 1, out.size(1))) << "\n";
      }
    }
  } catch (const std::exception& err) {  // ember's errors, and any other a library throws
    std::cerr << "charlm: " << err.what() << "\n";
    return 1;
  }
  if (args.ddp) distributed::destroy_process_group();
  return 0;
}
