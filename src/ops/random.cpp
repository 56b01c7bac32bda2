// Random number generation: one Philox stream per device, seeded by manual_seed.
//
// Each op reserves a range of the device's counter space, so a seed followed by the
// same sequence of ops gives the same numbers on every backend (the kernels compute
// element i from (seed, offset + i) alone; see kernels/philox.h).
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "ops/recording.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ops/fork_rng.h"
#include "ops/graph_rng.h"
#include "ops/launch.h"
#include "runtime/context.h"

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

// A capture that random ops draw from (Note [Graph-safe Philox]).
struct GraphRng {
  int device;
  uint64_t capture_id;
  const int64_t* seed_ptr;
  const int64_t* offset_ptr;
  uint64_t intragraph = 0;
};

// The process's generators: one seed, a Philox counter per device.
class Generators {
 public:
  // While captures are open: if `stream_capture_id` names one of `device`, reserves
  // `count` of its intragraph counters and fills in the call's seed, offset and pointers.
  bool reserve_in_capture(int device, uint64_t stream_capture_id, uint64_t count, detail::KernelCall& call) {
    std::lock_guard lock(mutex_);
    for (GraphRng& graph : graphs_) {
      if (graph.device != device || graph.capture_id != stream_capture_id) continue;
      call.seed = seed_;
      call.offset = graph.intragraph;
      graph.intragraph += (count + 3) & ~uint64_t{3};
      call.philox_seed_ptr = graph.seed_ptr;
      call.philox_offset_ptr = graph.offset_ptr;
      return true;
    }
    return false;
  }
  bool any_capture() const noexcept { return capturing_.load(std::memory_order_acquire) > 0; }
  void capture_prologue(GraphRng graph) {
    std::lock_guard lock(mutex_);
    graphs_.push_back(graph);
    capturing_.fetch_add(1, std::memory_order_release);
  }
  uint64_t capture_epilogue(uint64_t capture_id) noexcept {
    std::lock_guard lock(mutex_);
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->capture_id != capture_id) continue;
      uint64_t increment = it->intragraph;
      graphs_.erase(it);
      capturing_.fetch_sub(1, std::memory_order_release);
      return increment;
    }
    return 0;
  }
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
  std::vector<GraphRng> graphs_;  // open captures
  std::atomic<int> capturing_{0};
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
  const uint64_t count = 4 * static_cast<uint64_t>(out.numel());
  detail::KernelCall call{op, {std::move(out)}, {}, a, b};
  if (generators().any_capture() && t.device().is_cuda()) [[unlikely]] {
    // On a capturing stream: graph-safe Philox (Note [Graph-safe Philox]).
    const int device = t.device().index();
    auto [status, id] = detail::backend().capture_status(detail::current_stream_state(device)->native());
    if (status != detail::CaptureStatus::None && generators().reserve_in_capture(device, id, count, call)) {
      detail::launch(t.device(), call);
      return;
    }
  }
  auto [seed, offset] = reserve(t.device(), count);
  call.seed = seed;
  call.offset = offset;
  detail::launch(t.device(), call);
}

}  // namespace

std::pair<uint64_t, uint64_t> detail::reserve_random(Device device, uint64_t count) { return reserve(device, count); }

namespace detail {

void rng_capture_prologue(int device, uint64_t capture_id, const int64_t* seed_ptr, const int64_t* offset_ptr) {
  generators().capture_prologue(GraphRng{device, capture_id, seed_ptr, offset_ptr});
}

uint64_t rng_capture_epilogue(uint64_t capture_id) noexcept { return generators().capture_epilogue(capture_id); }

std::pair<uint64_t, uint64_t> rng_replay_prologue(int device, uint64_t increment) {
  return generators().reserve(Device(DeviceType::CUDA, device), increment);
}

}  // namespace detail

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
