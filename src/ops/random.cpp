// Random number generation: one Philox stream per device, seeded by manual_seed.
//
// Each op reserves a range of the device's counter space, so a seed followed by the
// same sequence of ops gives the same numbers on every backend (the kernels compute
// element i from (seed, offset + i) alone; see kernels/philox.h).
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/recording.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ops/fork_rng.h"
#include "ops/launch.h"

namespace ember {

namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

// Returns the next counter of `device` in `offsets` and advances it by `count` counters,
// rounded up to whole Philox blocks.
uint64_t advance(std::map<int, uint64_t>& offsets, Device device, uint64_t count) {
  auto [it, inserted] = offsets.try_emplace(device.is_cpu() ? -1 : device.index(), 0);
  uint64_t offset = it->second;
  it->second += (count + 3) & ~uint64_t{3};
  return offset;
}

// The process's generators: one seed, a Philox counter per device.
class Generators {
 public:
  // Returns {seed, offset} and advances the device's offset by `count` counters.
  std::pair<uint64_t, uint64_t> reserve(Device device, uint64_t count) {
    std::lock_guard lock(mutex_);
    return {seed_, advance(offsets_, device, count)};
  }
  void seed(uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed;
    offsets_.clear();
  }
  std::pair<uint64_t, std::map<int, uint64_t>> state() {
    std::lock_guard lock(mutex_);
    return {seed_, offsets_};
  }

 private:
  std::mutex mutex_;
  uint64_t seed_ = kDefaultSeed;
  std::map<int, uint64_t> offsets_;
};

Generators& generators() {
  static Generators instance;
  return instance;
}

// The calling thread's innermost ForkRng scope, if any: its draws go there.
thread_local detail::ForkRng* t_fork = nullptr;

std::pair<uint64_t, uint64_t> reserve(Device device, uint64_t count) {
  if (t_fork) return {t_fork->seed, advance(t_fork->offsets, device, count)};
  return generators().reserve(device, count);
}

// A complex tensor as its real view (torch.view_as_real): a trailing dim of 2 holding
// the real and imaginary parts; PyTorch fills complex tensors through that view.
detail::TensorArg real_view(const Tensor& t) {
  detail::TensorArg arg = detail::make_arg(t);
  if (!is_complex(t.dtype())) return arg;
  arg.dtype = to_real(t.dtype());
  for (int64_t& stride : arg.strides) stride *= 2;
  arg.sizes.push_back(2);
  arg.strides.push_back(1);
  return arg;
}

void fill_random(Tensor& t, detail::OpKind op, double a, double b) {
  if (t.numel() == 0) return;
  detail::TensorArg out = real_view(t);
  // Normal takes two uniforms per element, double uniforms two words each: reserve 4.
  auto [seed, offset] = reserve(t.device(), 4 * static_cast<uint64_t>(out.numel()));
  detail::KernelCall call{op, {std::move(out)}, {}, a, b};
  call.seed = seed;
  call.offset = offset;
  detail::launch(t.device(), call);
}

}  // namespace

std::pair<uint64_t, uint64_t> detail::reserve_random(Device device, uint64_t count) { return reserve(device, count); }

void manual_seed(uint64_t seed) {
  if (t_fork) {
    t_fork->seed = seed;
    t_fork->offsets.clear();
  } else {
    generators().seed(seed);
  }
}

detail::ForkRng::ForkRng() : outer_(t_fork) {
  if (outer_) {
    seed = outer_->seed;
    offsets = outer_->offsets;
  } else {
    std::tie(seed, offsets) = generators().state();
  }
  t_fork = this;
}
detail::ForkRng::~ForkRng() { t_fork = outer_; }

Tensor& Tensor::normal_(double mean, double std) {
  EMBER_CHECK(is_floating_point(dtype()) || is_complex(dtype()), TypeError,
              "normal_ expects a floating point or complex dtype, but got ", dtype());
  EMBER_CHECK(std >= 0.0, ValueError, "normal expects std >= 0.0, but found std ", std);
  ember::detail::Attrs node(ember::detail::NoArgs{}, "NormalBackward0");
  // Complex: each part normal with std / sqrt(2), so |z - mean| has variance std^2 (as PyTorch).
  double part_std = is_complex(dtype()) ? std / std::sqrt(2.0) : std;
  return ember::detail::recorded_inplace(ember::detail::Formula::Fill, *this, Tensor(),
                                            [&] { fill_random(*this, detail::OpKind::Normal, mean, part_std); }, node);
}

Tensor& Tensor::uniform_(double from, double to) {
  EMBER_CHECK(is_floating_point(dtype()) || is_complex(dtype()), TypeError,
              "uniform_ expects a floating point or complex dtype, but got ", dtype());
  EMBER_CHECK(from <= to, ValueError, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  ember::detail::Attrs node(ember::detail::NoArgs{}, "UniformBackward0");
  return ember::detail::recorded_inplace(ember::detail::Formula::Fill, *this, Tensor(),
                                            [&] { fill_random(*this, detail::OpKind::Uniform, from, to); }, node);
}

// requires_grad is set once the values are written (a leaf that requires grad refuses in-place writes).
Tensor rand(const IntList& shape, const TensorOptions& options) {
  return empty(shape, options.requires_grad(false)).uniform_(0.0, 1.0).requires_grad_(options.requires_grad());
}
Tensor randn(const IntList& shape, const TensorOptions& options) {
  return empty(shape, options.requires_grad(false)).normal_(0.0, 1.0).requires_grad_(options.requires_grad());
}
Tensor rand_like(const Tensor& t, const TensorOptions& options) {
  return empty_like(t, options.requires_grad(false)).uniform_(0.0, 1.0).requires_grad_(options.requires_grad());
}
Tensor randn_like(const Tensor& t, const TensorOptions& options) {
  return empty_like(t, options.requires_grad(false)).normal_(0.0, 1.0).requires_grad_(options.requires_grad());
}

}  // namespace ember
