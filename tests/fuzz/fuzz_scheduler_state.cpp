// The learning-rate schedulers' fuzz target (issue 34): every scheduler built with hostile
// arguments, stepped, its state_dict() mutated (values at the int64 and double edges, other
// dtypes and shapes, keys dropped or added) and loaded back with load_state_dict(), then
// stepped on. Every outcome must be a result or an ember::Error; a crash (which the
// ASan+UBSan build turns every memory or undefined-behaviour error into), any other
// exception type, a non-finite learning rate, momentum or beta1 in the optimizer, or a
// refused step or load that changed the scheduler or the optimizer fails.
//
// LLVMFuzzerTestOneInput is the libFuzzer entry point: the input's bytes choose the
// scheduler, its arguments, the steps and the mutations. Without libFuzzer (GCC builds,
// where CI runs it), main() feeds it seeded random inputs:
//   fuzz_scheduler_state [--seed S] [--iterations N] [--seconds T]   the loop (T only caps it)
//   fuzz_scheduler_state FILE...                                     replays inputs
// Each input is written to ./fuzz_scheduler_state.<pid>.input before it runs, so after a
// crash that file holds the input that caused it.
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "ember/ember.h"
#include "fuzz_driver.h"

namespace {

using ember::optim::LRScheduler;
using ember::optim::Optimizer;
using Schedulers = std::vector<std::shared_ptr<LRScheduler>>;

const std::string kInputPath = "fuzz_scheduler_state." + std::to_string(::getpid()) + ".input";
struct RemoveInputAtExit {
  ~RemoveInputAtExit() { std::remove(kInputPath.c_str()); }
} remove_input_at_exit;
uint64_t built_count = 0, loaded_count = 0, steps_count = 0;  // for the summary

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "fuzz_scheduler_state: FAILED: " << what << "\n  the input is in " << kInputPath << "\n";
  std::abort();
}

// Runs `call`; an ember::Error is an accepted outcome, anything else a failure.
template <typename F>
bool only_ember_errors(const char* what, F&& call) {
  try {
    call();
    return true;
  } catch (const ember::Error&) {
    return false;
  } catch (const std::exception& err) {
    fail(std::string(what) + " threw " + typeid(err).name() + ": " + std::string(err.what()).substr(0, 300));
  } catch (...) {
    fail(std::string(what) + " threw a non-std exception");
  }
}

// The input's bytes as the choices of one run; past the end, every choice is 0.
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  size_t below(size_t n) { return n == 0 ? 0 : byte() % n; }
  uint64_t word() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  int64_t integer() {
    static const int64_t kEdges[] = {0,
                                     1,
                                     -1,
                                     2,
                                     3,
                                     5,
                                     10,
                                     -3,
                                     1000,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max() - 1,
                                     std::numeric_limits<int64_t>::min() + 1,
                                     int64_t{1} << 31,
                                     int64_t{1} << 53,
                                     -(int64_t{1} << 53),
                                     int64_t{1} << 62};
    const size_t pick = below(std::size(kEdges) + 1);
    return pick < std::size(kEdges) ? kEdges[pick] : static_cast<int64_t>(word());
  }
  double number() {
    static const double kEdges[] = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    0.5,
                                    0.1,
                                    0.9,
                                    1e-4,
                                    25.0,
                                    1e4,
                                    1e308,
                                    -1e308,
                                    1e-310,
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    9.223372036854775807e18,
                                    1e200};
    const size_t pick = below(std::size(kEdges) + 1);
    if (pick < std::size(kEdges)) return kEdges[pick];
    const uint64_t bits = word();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

// The optimizer's learning rates and momenta, bit for bit (NaN compares equal to itself).
std::vector<uint64_t> optimizer_bits(const Optimizer& opt) {
  std::vector<uint64_t> out;
  auto push = [&](double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    out.push_back(bits);
  };
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    push(opt.lr(g));
    push(opt.momentum(g));
    push(opt.initial_lr(g).value_or(-1.0));
  }
  return out;
}

// The scheduler's whole state, bit for bit.
std::vector<uint8_t> scheduler_bits(const LRScheduler& sched) {
  std::vector<uint8_t> out;
  for (const auto& [key, t] : sched.state_dict()) {
    out.insert(out.end(), key.begin(), key.end());
    const ember::Tensor bytes = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(bytes.data_ptr());
    out.insert(out.end(), p, p + bytes.nbytes());
  }
  return out;
}

void check_finite(const LRScheduler& sched, const char* after) {
  const Optimizer& opt = sched.optimizer();
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    if (!std::isfinite(opt.lr(g)) || !std::isfinite(opt.momentum(g))) {
      fail(std::string("non-finite learning rate or momentum in the optimizer after ") + after + " of " +
           sched.type_name());
    }
  }
  for (double lr : sched.get_last_lr()) {
    if (!std::isfinite(lr)) fail(std::string("non-finite get_last_lr() after ") + after + " of " + sched.type_name());
  }
}

// `call` (a step or a load) either succeeds, leaving finite learning rates, or throws an
// ember::Error and changes neither the scheduler nor the optimizer.
template <typename F>
bool succeeds_or_changes_nothing(const char* what, LRScheduler& sched, F&& call) {
  const std::vector<uint8_t> before = scheduler_bits(sched);
  const std::vector<uint64_t> opt_before = optimizer_bits(sched.optimizer());
  if (only_ember_errors(what, call)) {
    check_finite(sched, what);
    return true;
  }
  if (scheduler_bits(sched) != before || optimizer_bits(sched.optimizer()) != opt_before)
    fail(std::string("a refused ") + what + " of " + sched.type_name() + " changed its state or the optimizer's");
  return false;
}

void step(LRScheduler& sched, Choices& in) {
  if (auto* plateau = dynamic_cast<ember::optim::ReduceLROnPlateau*>(&sched)) {
    const double metric = in.number();
    if (succeeds_or_changes_nothing("step(metric)", sched, [&] { plateau->step(metric); })) ++steps_count;
  } else if (succeeds_or_changes_nothing("step", sched, [&] { sched.step(); })) {
    ++steps_count;
  }
}

enum Kind { kStep, kMultiStep, kExponential, kLambda, kCosine, kLinear, kOneCycle, kPlateau, kSequential, kKinds };

// A scheduler of `kind` on `opt`, its arguments chosen by the input (half the time sane);
// null where the constructor refused them.
std::shared_ptr<LRScheduler> make(int kind, Optimizer& opt, Choices& in, int depth = 0) {
  using namespace ember::optim;
  const bool sane = in.below(2) == 0;
  auto integer = [&](int64_t usual) { return sane ? usual : in.integer(); };
  auto number = [&](double usual) { return sane ? usual : in.number(); };
  // The arguments are read into named values first, so that an input means the same
  // whatever order a compiler evaluates function arguments in.
  std::shared_ptr<LRScheduler> out;
  only_ember_errors("a constructor", [&] {
    switch (kind) {
      case kStep: {
        const int64_t step_size = integer(3);
        out = std::make_shared<StepLR>(opt, step_size, number(0.5));
        break;
      }
      case kMultiStep: {
        std::vector<int64_t> milestones{integer(2)};
        milestones.push_back(integer(5));
        milestones.push_back(in.integer());
        out = std::make_shared<MultiStepLR>(opt, milestones, number(0.3));
        break;
      }
      case kExponential: out = std::make_shared<ExponentialLR>(opt, number(0.9)); break;
      case kLambda: {
        const double base = number(0.95);
        out = std::make_shared<LambdaLR>(opt, [base](int64_t e) { return std::pow(base, static_cast<double>(e)); });
        break;
      }
      case kCosine: {
        const int64_t t_max = integer(10);
        out = std::make_shared<CosineAnnealingLR>(opt, t_max, number(0.001));
        break;
      }
      case kLinear: {
        const double start = number(0.25), end = number(1.0);
        out = std::make_shared<LinearLR>(opt, start, end, integer(8));
        break;
      }
      case kOneCycle: {
        auto options = OneCycleLROptions()
                           .pct_start(number(0.3))
                           .anneal_strategy(in.below(2) ? "cos" : "linear")
                           .cycle_momentum(in.below(4) != 0)
                           .base_momentum(number(0.85))
                           .max_momentum(number(0.95))
                           .div_factor(number(25))
                           .final_div_factor(number(1e4))
                           .three_phase(in.below(2) == 0);
        const double max_lr = number(0.4);
        out = std::make_shared<OneCycleLR>(opt, max_lr, integer(20), options);
        break;
      }
      case kPlateau: {
        const std::string mode = in.below(2) ? "min" : "max";
        const double factor = number(0.5);
        const int64_t patience = integer(2);
        const double threshold = number(0.05);
        const std::string threshold_mode = in.below(2) ? "rel" : "abs";
        const int64_t cooldown = integer(1);
        const double min_lr = number(0.01);
        out = std::make_shared<ReduceLROnPlateau>(opt, mode, factor, patience, threshold, threshold_mode, cooldown,
                                                  min_lr, number(1e-8));
        break;
      }
      case kSequential: {
        Schedulers children;
        for (size_t n = 1 + in.below(3); n > 0; --n) {
          int child = static_cast<int>(in.below(kKinds));
          if (child == kPlateau || (child == kSequential && depth > 0)) child = kStep;
          if (auto s = make(child, opt, in, depth + 1)) children.push_back(s);
        }
        std::vector<int64_t> milestones;
        for (size_t i = 1; i < children.size(); ++i) milestones.push_back(integer(static_cast<int64_t>(3 * i)));
        out = std::make_shared<SequentialLR>(opt, children, milestones);
        break;
      }
    }
  });
  if (out) check_finite(*out, "construction");
  return out;
}

// Replaces, drops or adds one entry of `sd`.
void mutate(ember::nn::StateDict& sd, Choices& in) {
  using namespace ember;
  const std::vector<std::string> keys = sd.keys();
  const std::string key = keys.empty() || in.below(8) == 0 ? "extra" : keys[in.below(keys.size())];
  const Tensor* current = sd.find(key);
  const bool list = current != nullptr && current->defined() && current->dim() == 1 && in.below(3) != 0;
  const int64_t length = list ? current->size(0) : static_cast<int64_t>(in.below(4));
  std::vector<double> numbers;
  std::vector<int64_t> integers;
  for (int64_t i = 0; i < length && i < 8; ++i) {
    numbers.push_back(in.number());
    integers.push_back(in.integer());
  }
  nn::StateDict out;
  Tensor value;
  switch (in.below(10)) {
    case 0: value = full({}, in.integer(), TensorOptions(kInt64)); break;
    case 1: value = full({}, in.number(), TensorOptions(kFloat64)); break;
    case 2:
      value = numbers.empty() ? empty({0}, TensorOptions(kFloat64)) : tensor(numbers, TensorOptions(kFloat64));
      break;
    case 3:
      value = integers.empty() ? empty({0}, TensorOptions(kInt64)) : tensor(integers, TensorOptions(kInt64));
      break;
    case 4: value = full({}, in.below(2) == 0, TensorOptions(kBool)); break;
    case 5: {
      static const char* const kTexts[] = {"min", "max", "rel", "abs", "cos", "linear", "", "\xff\x00x"};
      const std::string text = kTexts[in.below(std::size(kTexts))];
      value = text.empty() ? empty({0}, TensorOptions(kUInt8))
                           : tensor(std::vector<int64_t>(text.begin(), text.end()), TensorOptions(kInt64)).to(kUInt8);
      break;
    }
    case 6: value = full({2, 2}, in.number(), TensorOptions(kFloat64)); break;
    case 7: value = full({}, static_cast<int32_t>(in.integer()), TensorOptions(kInt32)); break;
    case 8: break;  // an undefined tensor
    case 9:         // dropped
      for (const auto& [k, t] : sd) {
        if (k != key) out.insert(k, t);
      }
      sd = std::move(out);
      return;
  }
  sd.insert(key, value);
}

std::shared_ptr<Optimizer> make_optimizer(Choices& in) {
  using namespace ember;
  auto param = [](int64_t n) { return ones({n}, TensorOptions().requires_grad(true)); };
  if (in.below(2) == 0) {
    auto opt = std::make_shared<optim::SGD>(std::vector<Tensor>{param(2)}, optim::SGDOptions(0.1).momentum(0.9));
    opt->add_param_group({param(3)}, optim::SGDOptions(0.05).momentum(0.9));
    return opt;
  }
  auto opt = std::make_shared<optim::Adam>(std::vector<Tensor>{param(2)}, optim::AdamOptions(0.1));
  opt->add_param_group({param(3)}, optim::AdamOptions(0.05));
  return opt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::remove(kInputPath.c_str());  // a new file: ext4 flushes one truncated in place on close
    std::ofstream out(kInputPath, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  Choices in(data, size);
  const int kind = static_cast<int>(in.below(kKinds));
  // The source of the state dict and the scheduler it is loaded into, alike but for arguments.
  const auto source_opt = make_optimizer(in);
  const auto source = make(kind, *source_opt, in);
  const auto target_opt = make_optimizer(in);
  const auto target = make(kind, *target_opt, in);
  if (!source || !target) return 0;
  ++built_count;
  for (size_t n = in.below(8); n > 0; --n) step(*source, in);
  ember::nn::StateDict sd = source->state_dict();
  for (size_t n = in.below(5); n > 0; --n) mutate(sd, in);
  if (succeeds_or_changes_nothing("load_state_dict", *target, [&] { target->load_state_dict(sd); })) ++loaded_count;
  for (size_t n = in.below(12); n > 0; --n) step(*target, in);
  // And once more through the state it saves now.
  only_ember_errors("a reload of its own state", [&] { target->load_state_dict(target->state_dict()); });
  return 0;
}

#ifndef EMBER_LIBFUZZER
int main(int argc, char** argv) {
  return fuzz::run(
      "fuzz_scheduler_state", argc, argv,
      [](uint64_t seed) {
        return [rng = std::mt19937_64(seed)](uint64_t) mutable {
          std::string input(std::uniform_int_distribution<size_t>(0, 256)(rng), '\0');
          for (char& c : input) c = static_cast<char>(rng());
          return input;
        };
      },
      [] {
        return std::to_string(built_count) + " pairs built, " + std::to_string(loaded_count) + " state dicts loaded, " +
               std::to_string(steps_count) + " steps taken, the others refused";
      });
}
#endif
