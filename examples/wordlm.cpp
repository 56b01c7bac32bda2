// The classic word-level language model (pytorch/examples' word_language_model), written as
// the spec recommends for device-agnostic code: the device chosen once (--disable-cuda, else
// cuda when available), the model moved there with to(device), the initial hidden state made
// with weight.new_zeros(...). It trains on the words of Debian's fortune cookies (every tenth
// file held out for validation; the most frequent words plus <unk>; <eos> ends each line) with
// truncated back-propagation through time (--bptt, the state carried over detached), gradient
// clipping and SGD whose learning rate is divided by 4 when the validation loss stops
// improving; then it samples a few sentences. With --packed it trains instead on whole lines
// (up to --bptt + 1 words each, --batch-size lines a batch) packed with pack_padded_sequence, so
// variable-length sequences run through the packed path; validation stays the same.
// --optimizer adamw trains with AdamW instead (--lr 1e-3 unless given; the same annealing).
// --checkpoint FILE saves the model, the optimizer (its learning rate too), the epoch, the best
// validation loss and the vocabulary's fingerprint after every epoch; --resume continues
// from it at the next epoch, as a whole run would have gone on (dropout's generator is seeded
// per epoch), refusing a file of another program, model or vocabulary. --amp trains with
// automatic mixed precision: the forward pass and the loss under ember::autocast (float16 on
// a cuda device, where the recurrent layers run in float16, bfloat16 on the cpu) and, in
// float16, the loss scaled by an amp::GradScaler (unscaled before the clipping), whose state
// the checkpoint keeps under "scaler.".
// --ddp, under `ember-run --nproc-per-node=N wordlm --ddp`: DistributedDataParallel over N
// ranks, one device each; rank r trains on its --batch-size / N of the batch's columns (text
// streams), so the averaged gradient is the whole batch's; rank 0 prints, checkpoints and
// samples. --data-parallel splits each batch's columns (and the hidden state's) over every
// cuda device of the process with nn::DataParallel. Neither goes with --packed.
//   wordlm [--model LSTM|GRU|RNN_TANH|RNN_RELU] [--epochs 1] [--max-batches N] [--bptt 35] [--packed] ...
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/ember.h"
#include "example_checkpoint.h"
#include "example_flags.h"
#include "example_setup.h"
#include "wordlm_model.h"

using namespace ember;

namespace {

struct Args : examples::CommonArgs {
  wordlm::Config model;
  int64_t epochs = 1, bptt = 35, log_interval = 200, max_batches = 0, sentences = 3;
  double clip = 0.25, temperature = 1.0;
  bool packed = false;
  bool amp = false;
  std::string optimizer = "sgd";
  bool lr_given = false;  // else 20 for SGD, 1e-3 for AdamW
  Args() {
    batch_size = 20;
    lr = 20;
    seed = 1111;
  }
};

constexpr const char* kUsage =
    "usage: wordlm [--model LSTM|GRU|RNN_TANH|RNN_RELU] [--emsize 200] [--nhid 200] [--nlayers 2] [--vocab 10000]\n"
    "              [--dropout 0.2] [--tied] [--lr 20 (SGD), 1e-3 (AdamW)] [--clip 0.25] [--epochs 1] [--max-batches "
    "N]\n"
    "              [--batch-size 20] [--bptt 35] [--log-interval 200] [--sentences 3] [--temperature 1.0]\n"
    "              [--packed] [--optimizer sgd|adamw] [--checkpoint FILE [--resume]] [--seed 1111] [--data DIR]\n"
    "              [--device cuda:0] [--disable-cuda] [--no-tf32] [--amp]\n"
    "              [--ddp] (under ember-run --nproc-per-node=N) [--data-parallel]\n";

[[noreturn]] void usage(const std::string& problem) { examples::refuse("wordlm", problem, kUsage); }

Args parse(int argc, char** argv) {
  Args args;
  examples::Flags flags(argc, argv, usage, kUsage);
  while (flags.next()) {
    if (flags.is("--lr")) {
      flags.read(args.lr);
      args.lr_given = true;
      continue;
    }
    if (read_common_flag(flags, args)) continue;
    if (flags.is("--model")) flags.read(args.model.rnn_type);
    else if (flags.is("--emsize")) flags.read(args.model.emsize);
    else if (flags.is("--nhid")) flags.read(args.model.nhid);
    else if (flags.is("--nlayers")) flags.read(args.model.nlayers);
    else if (flags.is("--vocab")) flags.read(args.model.tokens);
    else if (flags.is("--dropout")) flags.read(args.model.dropout);
    else if (flags.is("--tied")) args.model.tied = true;
    else if (flags.is("--clip")) flags.read(args.clip);
    else if (flags.is("--epochs")) flags.read(args.epochs);
    else if (flags.is("--max-batches")) flags.read(args.max_batches);
    else if (flags.is("--bptt")) flags.read(args.bptt);
    else if (flags.is("--log-interval")) flags.read(args.log_interval);
    else if (flags.is("--sentences")) flags.read(args.sentences);
    else if (flags.is("--temperature")) flags.read(args.temperature);
    else if (flags.is("--packed")) args.packed = true;
    else if (flags.is("--optimizer")) flags.read(args.optimizer);
    else if (flags.is("--amp")) args.amp = true;
    else flags.unknown();
  }
  examples::check_common_flags(args, usage);
  // A packed batch's lines are not split over ranks or devices (a rank could be left with
  // no line of two words while the others wait for it in the all-reduce).
  if (args.packed && (args.ddp || args.data_parallel)) usage("--packed does not go with --ddp or --data-parallel");
  if (args.optimizer != "sgd" && args.optimizer != "adamw")
    usage("--optimizer must be sgd or adamw, not '" + args.optimizer + "'");
  if (!args.lr_given) args.lr = args.optimizer == "adamw" ? 1e-3 : 20.0;
  if (args.batch_size <= 0 || args.bptt <= 0 || args.epochs <= 0 || args.model.tokens < 2)
    usage("--batch-size, --bptt and --epochs must be positive and --vocab at least 2");
  if (args.epochs > (int64_t{1} << 62)) usage("--epochs must be at most 2^62");
  if (args.temperature < 1e-3) usage("--temperature has to be greater or equal 1e-3");
  if (args.data.empty()) args.data = data::Fortunes::kDefaultRoot;
  return args;
}

// Words and line ends of a text, as pytorch/examples' data.py (<eos> after every line).
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream lines(text);
  std::string line, word;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    while (in >> word) words.push_back(word);
    words.push_back("<eos>");
  }
  return words;
}

// The lines of a text as word lists, each ending in <eos>.
std::vector<std::vector<std::string>> lines_of(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(words_of(line));
  return lines;
}

struct Vocabulary {
  std::vector<std::string> words;
  std::unordered_map<std::string, int64_t> index;
  int64_t unk = 0;

  // The `size` - 1 most frequent words of `corpus` (ties in alphabetical order) and <unk>.
  Vocabulary(const std::vector<std::string>& corpus, int64_t size) {
    std::map<std::string, int64_t> counts;
    for (const auto& w : corpus) ++counts[w];
    std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [w, n] : ranked) {
      if (static_cast<int64_t>(words.size()) == size - 1) break;
      index[w] = static_cast<int64_t>(words.size());
      words.push_back(w);
    }
    unk = static_cast<int64_t>(words.size());
    words.push_back("<unk>");
  }
  std::vector<int64_t> ids(const std::vector<std::string>& corpus) const {
    std::vector<int64_t> out;
    out.reserve(corpus.size());
    for (const auto& w : corpus) {
      auto found = index.find(w);
      out.push_back(found == index.end() ? unk : found->second);
    }
    return out;
  }
  // FNV-1a over the words in order (each ended by a 0 byte): the checkpoint's vocabulary
  // check, as the ids a model was trained with are the words' positions here.
  uint64_t fingerprint() const {
    uint64_t h = 14695981039346656037ull;
    for (const auto& w : words) {
      for (unsigned char c : w) h = (h ^ c) * 1099511628211ull;
      h *= 1099511628211ull;
    }
    return h;
  }
  Tensor encode(const std::vector<std::string>& corpus) const {
    const std::vector<int64_t> out = ids(corpus);
    return tensor(TensorData(out), TensorOptions(kInt64)).reshape({static_cast<int64_t>(out.size())});
  }
};

// pytorch/examples' batchify: `batch` columns of consecutive words, [steps, batch].
Tensor batchify(const Tensor& ids, int64_t batch, Device device) {
  const int64_t steps = ids.numel() / batch;
  return ids.narrow(0, 0, steps * batch).view({batch, steps}).t().contiguous().to(device);
}

// The mean cross-entropy over `source` with the model in eval mode.
double evaluate(wordlm::RNNModel& model, const Tensor& source, int64_t bptt) {
  model.eval();
  NoGradGuard no_grad;
  const int64_t batch = source.size(1);
  wordlm::Hidden hidden = model.init_hidden(batch);
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i + 1 < source.size(0); i += bptt) {
    const int64_t len = std::min(bptt, source.size(0) - 1 - i);
    auto [logits, next] = model.forward(source.narrow(0, i, len), hidden);
    hidden = next;
    total += nn::functional::cross_entropy(logits, source.narrow(0, i + 1, len).reshape({-1})).item<double>() * len;
    count += len;
  }
  return total / static_cast<double>(count);
}

// Batch `b` of --packed training: lines b * batch, ... (those of two words or more), each cut to
// bptt + 1 words; inputs and next-word targets packed alike (unsorted lengths).
std::pair<nn::utils::rnn::PackedSequence, Tensor> packed_batch(const std::vector<std::vector<int64_t>>& lines,
                                                               int64_t b, const Args& args, Device device) {
  std::vector<std::vector<int64_t>> batch;
  for (size_t i = static_cast<size_t>(b * args.batch_size);
       i < lines.size() && static_cast<int64_t>(batch.size()) < args.batch_size; ++i) {
    if (lines[i].size() < 2) continue;
    const size_t n = std::min(lines[i].size(), static_cast<size_t>(args.bptt + 1));
    batch.emplace_back(lines[i].begin(), lines[i].begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::vector<int64_t> lengths;
  size_t longest = 0;
  for (const auto& l : batch) {
    lengths.push_back(static_cast<int64_t>(l.size() - 1));
    longest = std::max(longest, l.size() - 1);
  }
  std::vector<int64_t> in(longest * batch.size(), 0), out(longest * batch.size(), 0);
  for (size_t j = 0; j < batch.size(); ++j) {
    for (size_t t = 0; t + 1 < batch[j].size(); ++t) {
      in[t * batch.size() + j] = batch[j][t];
      out[t * batch.size() + j] = batch[j][t + 1];
    }
  }
  const IntList shape{static_cast<int64_t>(longest), static_cast<int64_t>(batch.size())};
  Tensor inputs = tensor(TensorData(in), TensorOptions(kInt64)).reshape(shape).to(device);
  Tensor targets = tensor(TensorData(out), TensorOptions(kInt64)).reshape(shape).to(device);
  return {nn::utils::rnn::pack_padded_sequence(inputs, lengths, false, false),
          nn::utils::rnn::pack_padded_sequence(targets, lengths, false, false).data()};
}

void generate(wordlm::RNNModel& model, const Vocabulary& vocab, const Args& args, Device device) {
  model.eval();
  NoGradGuard no_grad;
  wordlm::Hidden hidden = model.init_hidden(1);
  Tensor input = (rand({1, 1}) * static_cast<double>(vocab.words.size())).to(kInt64).to(device);
  for (int64_t s = 0; s < args.sentences; ++s) {
    std::string sentence;
    for (int words = 0; words < 60; ++words) {
      auto [logits, next] = model.forward(input, hidden);
      hidden = next;
      Tensor probs = softmax(logits.reshape({-1}).to(kFloat64) / args.temperature, 0);
      const int64_t id = probs.multinomial(1).item<int64_t>();
      input.fill_(id);
      if (vocab.words[static_cast<size_t>(id)] == "<eos>") break;
      sentence += (sentence.empty() ? "" : " ") + vocab.words[static_cast<size_t>(id)];
    }
    std::printf("| sample %lld | %s\n", static_cast<long long>(s + 1), sentence.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    examples::DdpRank ddp_rank;
    if (args.ddp) ddp_rank = examples::init_ddp(args.disable_cuda, args.batch_size, usage);
    const bool lead = ddp_rank.rank == 0;  // prints, checkpoints and samples
    std::string wanted = args.device;
    if (args.ddp && wanted.empty() && !args.disable_cuda) wanted = "cuda:" + std::to_string(ddp_rank.local_rank);
    const Device device = examples::choose_device(args.disable_cuda, wanted, args.data_parallel);
    if (args.no_tf32) {
      backends::cuda::matmul.allow_tf32 = false;
      backends::cudnn.allow_tf32 = false;
    }
    manual_seed(args.seed);
    // The checkpoint's metadata first: a file of another program is refused before the corpus
    // or its tensors are read.
    int64_t first_epoch = 1;
    if (args.resume) {
      // At most 2^62 epochs, so that first_epoch + --epochs cannot overflow.
      first_epoch = examples::metadata_integer(args.checkpoint, "epoch", 1, int64_t{1} << 62) + 1;
      if (load_metadata(args.checkpoint).count("wordlm_vocabulary") == 0)
        throw ValueError(args.checkpoint +
                         " has no 'wordlm_vocabulary' in its metadata: it is not a checkpoint of wordlm");
    }
    data::Fortunes fortunes(args.data);
    const std::vector<std::string> train_words = words_of(fortunes.train_text());
    const Vocabulary vocab(train_words, args.model.tokens);
    wordlm::Config config = args.model;
    config.tokens = static_cast<int64_t>(vocab.words.size());
    // --ddp: this rank's columns of the batch.
    const int64_t batch = args.batch_size / ddp_rank.world;
    const Tensor train = batchify(vocab.encode(train_words), args.batch_size, device)
                             .narrow(1, ddp_rank.rank * batch, batch)
                             .contiguous();
    std::vector<std::vector<int64_t>> train_lines;
    if (args.packed) {
      for (const auto& line : lines_of(fortunes.train_text())) train_lines.push_back(vocab.ids(line));
    }
    const Tensor valid = batchify(vocab.encode(words_of(fortunes.validation_text())), 10, device);
    if (lead) {
      std::printf("wordlm: %s on %s, %lld words of training text, %lld of validation, vocabulary %lld\n",
                  config.rnn_type.c_str(), device.str().c_str(), static_cast<long long>(train.numel() * ddp_rank.world),
                  static_cast<long long>(valid.numel()), static_cast<long long>(config.tokens));
    }

    auto model = std::make_shared<wordlm::RNNModel>(config);
    model->to(device);
    std::shared_ptr<nn::parallel::DistributedDataParallel> ddp;
    if (args.ddp) {  // starts from rank 0's weights
      nn::parallel::DDPOptions options;
      if (device.is_cuda()) options.device_ids({device.index()});
      ddp = std::make_shared<nn::parallel::DistributedDataParallel>(model, options);
      if (lead)
        std::printf("DistributedDataParallel on %d ranks, %lld columns each\n", ddp_rank.world,
                    static_cast<long long>(batch));
    }
    std::shared_ptr<nn::DataParallel> data_parallel;
    if (args.data_parallel) {
      const std::vector<int> device_ids = examples::data_parallel_devices(device, usage);
      data_parallel = std::make_shared<nn::DataParallel>(model, device_ids);
      std::printf("DataParallel over %zu devices\n", device_ids.size());
    }
    // One truncated-BPTT window through the model, the wrapper's way: logits [T * N, tokens].
    auto run_window = [&](const Tensor& input, const wordlm::Hidden& hidden) -> std::pair<Tensor, wordlm::Hidden> {
      auto as_pair = [](std::vector<Tensor> out) {
        Tensor logits = out.front();
        return std::make_pair(logits, wordlm::Hidden(out.begin() + 1, out.end()));
      };
      auto flat = [](std::pair<Tensor, wordlm::Hidden> out) {
        std::vector<Tensor> all{out.first};
        all.insert(all.end(), out.second.begin(), out.second.end());
        return all;
      };
      if (ddp) return as_pair(ddp->forward_with([&] { return flat(model->forward(input, hidden)); }));
      if (!data_parallel) return model->forward(input, hidden);
      // The columns (dim 1) of the input and of the state go to the replicas; each returns
      // its logits as [T, n, tokens], gathered along the same dim.
      std::vector<Tensor> inputs{input};
      inputs.insert(inputs.end(), hidden.begin(), hidden.end());
      auto out = as_pair(data_parallel->forward_with(
          inputs,
          [](nn::Module& replica, const std::vector<Tensor>& chunk) {
            auto& m = static_cast<wordlm::RNNModel&>(replica);
            auto [logits, next] = m.forward(chunk[0], wordlm::Hidden(chunk.begin() + 1, chunk.end()));
            std::vector<Tensor> all{logits.view({chunk[0].size(0), chunk[0].size(1), -1})};
            all.insert(all.end(), next.begin(), next.end());
            return all;
          },
          /*dim=*/1));
      out.first = out.first.reshape({-1, out.first.size(2)});
      return out;
    };
    const std::vector<Tensor> params = model->parameters();
    std::unique_ptr<optim::Optimizer> optimizer;
    if (args.optimizer == "adamw") optimizer = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(args.lr));
    else optimizer = std::make_unique<optim::SGD>(params, optim::SGDOptions(args.lr));
    // --amp: float16 with loss scaling on a cuda device, bfloat16 (no scaling) on the cpu.
    const DType amp_dtype = device.is_cuda() ? kFloat16 : kBFloat16;
    amp::GradScaler scaler(device, 65536.0, 2.0, 0.5, 2000, /*enabled=*/args.amp && amp_dtype == kFloat16);
    double best = INFINITY;
    const std::string model_flags = "the same --model, --emsize, --nhid, --nlayers, --vocab, --tied and --optimizer";
    if (args.resume) {
      const auto metadata = load_metadata(args.checkpoint);
      const std::string saved_vocabulary = metadata.at("wordlm_vocabulary");
      if (saved_vocabulary != std::to_string(vocab.fingerprint()))
        throw ValueError(args.checkpoint + ": its vocabulary (fingerprint " + saved_vocabulary +
                         ") is not this run's (" + std::to_string(vocab.fingerprint()) +
                         "): the same --vocab and --data are needed");
      const auto best_text = metadata.find("best_valid_loss");
      if (best_text != metadata.end() && best_text->second != "inf") {
        const char* begin = best_text->second.data();
        const auto [end, error] = std::from_chars(begin, begin + best_text->second.size(), best);
        if (error != std::errc() || end != begin + best_text->second.size())
          throw ValueError(args.checkpoint + ": metadata best_valid_loss='" + best_text->second + "' is not a number");
      }
      nn::StateDict model_state, optimizer_state, scaler_state;
      for (const auto& [key, t] : load(args.checkpoint)) {
        if (key.rfind("optimizer.", 0) == 0) optimizer_state.insert(key.substr(10), t);
        else if (key.rfind("scaler.", 0) == 0) scaler_state.insert(key.substr(7), t);
        else model_state.insert(key, t);
      }
      if (scaler.is_enabled() && !scaler_state.empty()) {
        examples::load_checkpoint_part(args.checkpoint, "scaler", "GradScaler, --amp",
                                       [&] { scaler.load_state_dict(scaler_state); });
      }
      examples::load_checkpoint_part(args.checkpoint, "model", model_flags,
                                     [&] { model->load_state_dict(model_state); });
      examples::load_checkpoint_part(args.checkpoint, "optimizer", model_flags,
                                     [&] { optimizer->load_state_dict(optimizer_state); });
      if (lead) {
        std::printf("resumed from %s after epoch %lld (lr %.4g)\n", args.checkpoint.c_str(),
                    static_cast<long long>(first_epoch - 1), optimizer->lr());
      }
    }
    auto save_checkpoint = [&](int64_t epoch) {
      nn::StateDict checkpoint = model->state_dict();
      for (const auto& [key, t] : optimizer->state_dict()) checkpoint.insert("optimizer." + key, t);
      for (const auto& [key, t] : scaler.state_dict()) checkpoint.insert("scaler." + key, t);
      char best_text[32];
      std::snprintf(best_text, sizeof best_text, "%.17g", best);
      save(checkpoint, args.checkpoint,
           {{"epoch", std::to_string(epoch)},
            {"wordlm_vocabulary", std::to_string(vocab.fingerprint())},
            {"best_valid_loss", best_text}});
    };
    const int64_t batches = args.packed
                                ? static_cast<int64_t>((train_lines.size() + args.batch_size - 1) / args.batch_size)
                                : (train.size(0) - 1 + args.bptt - 1) / args.bptt;
    const int64_t per_epoch = args.max_batches > 0 ? std::min(batches, args.max_batches) : batches;
    for (int64_t epoch = first_epoch; epoch < first_epoch + args.epochs; ++epoch) {
      // Dropout's generator seeded per epoch: a run resumed after epoch N repeats a whole run's
      // epoch N + 1 exactly (the model, the optimizer and the learning rate come from the file);
      // each rank of --ddp draws its own masks.
      manual_seed(args.seed + static_cast<uint64_t>(epoch) + (static_cast<uint64_t>(ddp_rank.rank) << 32));
      model->train();
      const auto epoch_start = std::chrono::steady_clock::now();
      auto log_start = epoch_start;
      double log_loss = 0;
      int64_t log_words = 0;
      wordlm::Hidden hidden = model->init_hidden(batch);
      for (int64_t b = 0; b < per_epoch; ++b) {
        optimizer->zero_grad();
        Tensor loss;
        int64_t words = 0;
        std::optional<autocast> mixed;
        if (args.amp) mixed.emplace(device.type(), amp_dtype);
        if (args.packed) {
          auto [inputs, targets] = packed_batch(train_lines, b, args, device);
          if (targets.numel() == 0) continue;
          loss = nn::functional::cross_entropy(model->forward(inputs), targets);
          words = targets.numel();
        } else {
          const int64_t i = b * args.bptt, len = std::min(args.bptt, train.size(0) - 1 - i);
          hidden = wordlm::RNNModel::repackage(hidden);
          auto [logits, next] = run_window(train.narrow(0, i, len), hidden);
          hidden = next;
          loss = nn::functional::cross_entropy(logits, train.narrow(0, i + 1, len).reshape({-1}));
          words = len * args.batch_size;  // every rank's
        }
        mixed.reset();
        scaler.scale(loss).backward();  // as is when the scaler is disabled
        scaler.unscale_(*optimizer);    // the clipping sees the true gradients
        nn::utils::clip_grad_norm_(params, args.clip);
        scaler.step(*optimizer);
        scaler.update();
        log_loss += loss.item<double>();
        log_words += words;
        if (((b + 1) % args.log_interval == 0 || b + 1 == per_epoch) && args.ddp) {  // every rank's mean loss
          Tensor mean = full({}, log_loss, TensorOptions(kFloat64).device(device));
          distributed::all_reduce(mean, distributed::ReduceOp::AVG);
          log_loss = mean.item<double>();
        }
        if (((b + 1) % args.log_interval == 0 || b + 1 == per_epoch) && lead) {
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - log_start).count();
          const int64_t n = (b + 1) % args.log_interval == 0 ? args.log_interval : (b + 1) % args.log_interval;
          const double mean = log_loss / static_cast<double>(n);
          std::printf(
              "| epoch %3lld | %5lld/%5lld batches | lr %.4g | ms/batch %7.2f | loss %5.2f | ppl %8.2f | "
              "words/s %8.0f\n",
              static_cast<long long>(epoch), static_cast<long long>(b + 1), static_cast<long long>(per_epoch),
              optimizer->lr(), 1000 * seconds / static_cast<double>(n), mean, std::exp(mean),
              static_cast<double>(log_words) / seconds);
          std::fflush(stdout);
        }
        if ((b + 1) % args.log_interval == 0 || b + 1 == per_epoch) {
          log_loss = 0;
          log_words = 0;
          log_start = std::chrono::steady_clock::now();
        }
      }
      // Every rank evaluates the same model on the whole validation text, so every rank makes
      // the same annealing decision.
      const double val_loss = evaluate(*model, valid, args.bptt);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      if (lead) {
        std::printf("| end of epoch %3lld | time: %6.1fs | valid loss %5.2f | valid ppl %8.2f\n",
                    static_cast<long long>(epoch), seconds, val_loss, std::exp(val_loss));
        std::fflush(stdout);
      }
      if (val_loss < best) best = val_loss;
      else optimizer->set_lr(optimizer->lr() / 4.0);  // no improvement: anneal, as pytorch/examples
      if (!args.checkpoint.empty() && lead) save_checkpoint(epoch);
    }
    if (lead) generate(*model, vocab, args, device);
    if (args.ddp) distributed::destroy_process_group();
  } catch (const Error& e) {
    std::fprintf(stderr, "wordlm: %s\n", e.what());
    return 1;
  }
  return 0;
}
