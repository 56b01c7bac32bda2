// Random number generation: generators (Philox streams), each device's default generator,
// seeding and states (Note [Generators]), and the random fills.
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/generator.h"
#include "ops/fork_rng.h"
#include "ops/graph_rng.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "runtime/context.h"

namespace ember {

namespace detail {

// A Philox stream (Note [Generators]); several generators may share one (Note
// [Graph-safe generator states] in ops/graph_rng.h).
struct GeneratorState {
  GeneratorState(Device d, uint64_t s, uint64_t o = 0) : device(d), seed(s), offset(o) {}
  const Device device;
  mutable std::mutex mutex;  // taken last: after Generators' and the generator's
  uint64_t seed;
  uint64_t offset;  // the next Philox counter
};

// A generator: the state it draws from now (graphsafe_set_state swaps it).
struct GeneratorImpl {
  GeneratorImpl(Device d, uint64_t s) : device(d), state(std::make_shared<GeneratorState>(d, s)) {}
  const Device device;
  mutable std::mutex mutex;  // guards `state`; taken after Generators' mutex, never before it
  std::shared_ptr<GeneratorState> state;
};

}  // namespace detail

namespace {

// Note [Generators]
// A generator is a Philox stream: a seed and the next counter. A draw of n values reserves
// n counters (rounded up to whole Philox blocks) and its kernel computes value i from
// (seed, offset + i) alone, so a seed gives the same numbers on every backend. Each device
// has a default generator (index -1: the cpu), made on first use with the seed last given to
// every device (PyTorch's default seed until then), so ember::manual_seed never has to start
// a backend to seed devices it has not touched. A ForkRng scope (ops/fork_rng.h) redirects
// the calling thread's default draws to copies of the default generators' states; a
// generator passed to an op is drawn from directly, scope or not.
constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

constexpr uint64_t round_to_blocks(uint64_t count) { return (count + 3) & ~uint64_t{3}; }

int generator_index(Device device) { return device.is_cpu() ? -1 : device.index(); }

// Calls `f` on the state `g` draws from, both locked.
template <typename F>
auto with_state(const detail::GeneratorImpl& g, F f) {
  std::lock_guard lock(g.mutex);
  std::lock_guard state_lock(g.state->mutex);
  return f(*g.state);
}

std::shared_ptr<detail::GeneratorState> state_of(const detail::GeneratorImpl& g) {
  std::lock_guard lock(g.mutex);
  return g.state;
}

std::pair<uint64_t, uint64_t> advance(detail::GeneratorState& state, uint64_t count) {
  const uint64_t offset = state.offset;
  state.offset += round_to_blocks(count);
  return {state.seed, offset};
}

std::pair<uint64_t, uint64_t> advance(const detail::GeneratorImpl& g, uint64_t count) {
  return with_state(g, [&](detail::GeneratorState& state) { return advance(state, count); });
}

void reseed(const detail::GeneratorImpl& g, uint64_t seed) {
  with_state(g, [&](detail::GeneratorState& state) {
    state.seed = seed;
    state.offset = 0;
  });
}

uint64_t nondeterministic_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// A capture that random ops draw from (Note [Graph-safe Philox]): its registered states.
struct GraphRng {
  struct Slot {
    detail::RngCaptureSlot slot;
    uint64_t intragraph = 0;
  };
  int device;
  uint64_t capture_id;
  std::vector<Slot> slots;
};

// The default generators and the open captures.
class Generators {
 public:
  Generator& get(int index) {
    std::lock_guard lock(mutex_);
    return get_locked(index);
  }
  // Seeds the cpu's (cpu) and every cuda device's (cuda) default generators, including
  // those made later.
  void seed_all(uint64_t seed, bool cpu, bool cuda) {
    std::lock_guard lock(mutex_);
    if (cpu) cpu_seed_ = seed;
    if (cuda) cuda_seed_ = seed;
    for (auto& [index, generator] : defaults_) {
      if (index < 0 ? cpu : cuda) reseed(*generator.impl(), seed);
    }
  }
  // The default generators' states, and the seeds of those not made yet (ForkRng).
  void snapshot(detail::ForkRng& fork) {
    std::lock_guard lock(mutex_);
    fork.cpu_seed = cpu_seed_;
    fork.cuda_seed = cuda_seed_;
    for (auto& [index, generator] : defaults_) {
      fork.states[index] = with_state(*generator.impl(), [](const detail::GeneratorState& state) {
        return detail::ForkRng::State{state.seed, state.offset};
      });
    }
  }
  // While captures are open: if `stream_capture_id` names one of `device`, reserves
  // `count` of the intragraph counters of the state `generator` (by default the device's
  // default generator) draws from and fills in the call's seed, offset and pointers.
  // CudaError when that state is not registered with the capture.
  bool reserve_in_capture(int device, uint64_t stream_capture_id, uint64_t count,
                          const std::optional<Generator>& generator, detail::KernelCall& call) {
    std::lock_guard lock(mutex_);
    for (GraphRng& graph : graphs_) {
      if (graph.device != device || graph.capture_id != stream_capture_id) continue;
      const detail::GeneratorImpl& g = generator ? *generator->impl() : *get_locked(device).impl();
      std::lock_guard generator_lock(g.mutex);
      for (GraphRng::Slot& slot : graph.slots) {
        if (slot.slot.state != g.state) continue;
        {
          std::lock_guard state_lock(g.state->mutex);
          call.seed = g.state->seed;
        }
        call.offset = slot.intragraph;
        slot.intragraph += round_to_blocks(count);
        call.philox_seed_ptr = slot.slot.seed_ptr;
        call.philox_offset_ptr = slot.slot.offset_ptr;
        return true;
      }
      detail::fail<CudaError>(
          "Attempt to increase offset for a CUDA generator not in capture mode. (During a "
          "capture, a generator other than the default one draws only from a state registered "
          "with the capturing graph: CUDAGraph::register_generator_state.)");
    }
    return false;
  }
  bool any_capture() const noexcept { return capturing_.load(std::memory_order_acquire) > 0; }
  void capture_prologue(GraphRng graph) {
    std::lock_guard lock(mutex_);
    graphs_.push_back(graph);
    capturing_.fetch_add(1, std::memory_order_release);
  }
  void capture_epilogue(uint64_t capture_id, std::span<uint64_t> increments) noexcept {
    std::lock_guard lock(mutex_);
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->capture_id != capture_id) continue;
      for (size_t i = 0; i < increments.size() && i < it->slots.size(); ++i) increments[i] = it->slots[i].intragraph;
      graphs_.erase(it);
      capturing_.fetch_sub(1, std::memory_order_release);
      return;
    }
  }

 private:
  Generator& get_locked(int index) {
    auto it = defaults_.find(index);
    if (it == defaults_.end()) {
      Device device = index < 0 ? Device(DeviceType::CPU) : Device(DeviceType::CUDA, index);
      it = defaults_.emplace(index, Generator(device)).first;
      reseed(*it->second.impl(), index < 0 ? cpu_seed_ : cuda_seed_);
    }
    return it->second;
  }

  std::mutex mutex_;
  uint64_t cpu_seed_ = kDefaultSeed, cuda_seed_ = kDefaultSeed;
  std::map<int, Generator> defaults_;  // device index (-1: cpu) -> its default generator
  std::vector<GraphRng> graphs_;       // open captures
  std::atomic<int> capturing_{0};
};

Generators& generators() {
  static Generators instance;
  return instance;
}

// The calling thread's innermost ForkRng scope, if any: its default draws go there.
thread_local detail::ForkRng* t_fork = nullptr;

void check_generator_device(const Generator& generator, Device device) {
  const Device own = generator.device();
  EMBER_CHECK(own.type() == device.type(), DeviceError, "Expected a '", device.is_cpu() ? "cpu" : "cuda",
              "' device type for generator but found '", own.is_cpu() ? "cpu" : "cuda", "'");
}

std::pair<uint64_t, uint64_t> reserve(Device device, uint64_t count, const std::optional<Generator>& generator) {
  if (generator) {
    check_generator_device(*generator, device);
    return advance(*generator->impl(), count);
  }
  const int index = generator_index(device);
  if (t_fork) {
    auto [it, inserted] =
        t_fork->states.try_emplace(index, detail::ForkRng::State{index < 0 ? t_fork->cpu_seed : t_fork->cuda_seed, 0});
    const uint64_t offset = it->second.offset;
    it->second.offset += round_to_blocks(count);
    return {it->second.seed, offset};
  }
  return advance(*generators().get(index).impl(), count);
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

void fill_random(Tensor& t, detail::OpKind op, double a, double b, const std::optional<Generator>& generator) {
  if (generator) check_generator_device(*generator, t.device());
  if (t.numel() == 0) return;
  detail::TensorArg out = real_view(t);
  // Normal takes two uniforms per element, double uniforms two words each: reserve 4.
  const uint64_t count = 4 * static_cast<uint64_t>(out.numel());
  detail::KernelCall call{op, {std::move(out)}, {}};
  if (op == detail::OpKind::Normal) call.args = detail::kargs::Normal{a, b};
  else call.args = detail::kargs::Uniform{a, b};
  if (generators().any_capture() && t.device().is_cuda()) [[unlikely]] {
    // On a capturing stream: graph-safe Philox (Note [Graph-safe Philox]) from a state
    // registered with the capture.
    const int device = t.device().index();
    auto [status, id] = detail::backend().capture_status(detail::current_stream_state(device)->native());
    if (status != detail::CaptureStatus::None) {
      if (generators().reserve_in_capture(device, id, count, generator, call)) {
        detail::launch(t.device(), call);
        return;
      }
    }
  }
  auto [seed, offset] = reserve(t.device(), count, generator);
  call.seed = seed;
  call.offset = offset;
  detail::launch(t.device(), call);
}

// The state tensor's layout: seed, then offset, little-endian uint64s (x86-64 and every CUDA
// host is little-endian).
constexpr int64_t kStateBytes = 16;

Tensor state_tensor(uint64_t seed, uint64_t offset) {
  Tensor state = empty({kStateBytes}, TensorOptions(kUInt8));
  std::memcpy(state.data_ptr<uint8_t>(), &seed, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset, 8);
  return state;
}

std::pair<uint64_t, uint64_t> read_state(const Tensor& state) {
  EMBER_CHECK(state.defined() && state.dtype() == kUInt8 && state.device().is_cpu(), TypeError,
              "RNG state must be a torch.ByteTensor");
  EMBER_CHECK(state.numel() == kStateBytes, ValueError, "RNG state is wrong size: expected ", kStateBytes,
              " bytes, got ", state.numel());
  const std::vector<uint8_t> bytes = state.reshape({-1}).to_vector<uint8_t>();
  uint64_t seed = 0, offset = 0;
  std::memcpy(&seed, bytes.data(), 8);
  std::memcpy(&offset, bytes.data() + 8, 8);
  EMBER_CHECK(offset % 4 == 0, ValueError, "offset must be a multiple of 4, got ", offset);
  return {seed, offset};
}

Generator& cuda_default(int device) {
  return default_generator(Device(DeviceType::CUDA, device < 0 ? cuda::current_device() : device));
}

}  // namespace

std::pair<uint64_t, uint64_t> detail::reserve_random(Device device, uint64_t count,
                                                     const std::optional<Generator>& generator) {
  return reserve(device, count, generator);
}

namespace detail {

std::shared_ptr<GeneratorState> generator_state(const Generator& generator) { return state_of(*generator.impl()); }

std::shared_ptr<GeneratorState> default_generator_state(int device) {
  return state_of(*generators().get(device).impl());
}

Device generator_state_device(const GeneratorState& state) noexcept { return state.device; }

void rng_capture_prologue(int device, uint64_t capture_id, const std::vector<RngCaptureSlot>& slots) {
  GraphRng graph{device, capture_id, {}};
  for (const RngCaptureSlot& slot : slots) graph.slots.push_back({slot, 0});
  generators().capture_prologue(std::move(graph));
}

void rng_capture_epilogue(uint64_t capture_id, std::span<uint64_t> increments) noexcept {
  generators().capture_epilogue(capture_id, increments);
}

std::pair<uint64_t, uint64_t> rng_replay_prologue(GeneratorState& state, uint64_t increment) {
  std::lock_guard lock(state.mutex);
  return advance(state, increment);
}

}  // namespace detail

// ---- generators ------------------------------------------------------------------

Generator::Generator(Device device) {
  if (device.is_cuda() && device.index() < 0) device = Device(DeviceType::CUDA, cuda::current_device());
  impl_ = std::make_shared<detail::GeneratorImpl>(device, kDefaultSeed);
}

Device Generator::device() const { return impl_->device; }

Generator& Generator::manual_seed(uint64_t seed) {
  reseed(*impl_, seed);
  return *this;
}

uint64_t Generator::seed() {
  const uint64_t seed = nondeterministic_seed();
  reseed(*impl_, seed);
  return seed;
}

uint64_t Generator::initial_seed() const {
  return with_state(*impl_, [](const detail::GeneratorState& state) { return state.seed; });
}

Tensor Generator::get_state() const {
  auto [seed, offset] = with_state(*impl_, [](const detail::GeneratorState& state) {
    return std::pair{state.seed, state.offset};
  });
  return state_tensor(seed, offset);
}

void Generator::set_state(const Tensor& state) {
  auto [seed, offset] = read_state(state);
  with_state(*impl_, [&](detail::GeneratorState& s) {
    s.seed = seed;
    s.offset = offset;
  });
}

// Note [Graph-safe generator states] (ops/graph_rng.h): handles on states, not copies.
Generator Generator::graphsafe_get_state() const {
  auto handle = std::make_shared<detail::GeneratorImpl>(impl_->device, kDefaultSeed);
  handle->state = state_of(*impl_);
  return Generator(std::move(handle));
}

void Generator::graphsafe_set_state(const Generator& state) {
  EMBER_CHECK(state.device() == device(), DeviceError, "graphsafe_set_state: the state is of a generator on ",
              state.device(), ", this generator is on ", device());
  std::shared_ptr<detail::GeneratorState> shared = state_of(*state.impl_);
  std::lock_guard lock(impl_->mutex);
  impl_->state = std::move(shared);
}

Generator& default_generator(Device device) {
  if (device.is_cpu()) return generators().get(-1);
  const int count = cuda::device_count();
  const int index = device.index() < 0 ? cuda::current_device() : device.index();
  EMBER_CHECK(index < count, DeviceError, "Invalid device index ", index, ": there are ", count,
              " cuda devices, so no default generator for cuda:", index);
  return generators().get(index);
}

void manual_seed(uint64_t seed) {
  if (t_fork) {
    for (auto& [index, state] : t_fork->states) state = {seed, 0};
    t_fork->cpu_seed = t_fork->cuda_seed = seed;
  } else {
    generators().seed_all(seed, /*cpu=*/true, /*cuda=*/true);
  }
}

uint64_t seed() {
  const uint64_t seed = nondeterministic_seed();
  manual_seed(seed);
  return seed;
}

uint64_t initial_seed() { return default_generator(Device(DeviceType::CPU)).initial_seed(); }
Tensor get_rng_state() { return default_generator(Device(DeviceType::CPU)).get_state(); }
void set_rng_state(const Tensor& state) { default_generator(Device(DeviceType::CPU)).set_state(state); }

namespace cuda {

void manual_seed(uint64_t seed) { cuda_default(-1).manual_seed(seed); }
void manual_seed_all(uint64_t seed) { generators().seed_all(seed, /*cpu=*/false, /*cuda=*/true); }
void seed() { cuda_default(-1).seed(); }
void seed_all() { manual_seed_all(nondeterministic_seed()); }
uint64_t initial_seed() { return cuda_default(-1).initial_seed(); }
Tensor get_rng_state(int device) { return cuda_default(device).get_state(); }
void set_rng_state(const Tensor& state, int device) { cuda_default(device).set_state(state); }

std::vector<Tensor> get_rng_state_all() {
  std::vector<Tensor> states;
  for (int device = 0; device < device_count(); ++device) states.push_back(get_rng_state(device));
  return states;
}

void set_rng_state_all(const std::vector<Tensor>& states) {
  const int count = device_count();
  EMBER_CHECK(static_cast<int64_t>(states.size()) == count, ValueError, "set_rng_state_all: ", states.size(),
              " states for ", count, " cuda devices");
  for (const Tensor& state : states) read_state(state);  // all checked before any is set
  for (int device = 0; device < count; ++device) set_rng_state(states[device], device);
}

}  // namespace cuda

detail::ForkRng::ForkRng() : outer_(t_fork) {
  if (outer_) {
    states = outer_->states;
    cpu_seed = outer_->cpu_seed;
    cuda_seed = outer_->cuda_seed;
  } else {
    generators().snapshot(*this);
  }
  t_fork = this;
}
detail::ForkRng::~ForkRng() { t_fork = outer_; }

Tensor& Tensor::normal_(double mean, double std, std::optional<Generator> generator) {
  EMBER_CHECK(is_floating_point(dtype()) || is_complex(dtype()), TypeError,
              "normal_ expects a floating point or complex dtype, but got ", dtype());
  EMBER_CHECK(std >= 0.0, ValueError, "normal expects std >= 0.0, but found std ", std);
  ember::detail::Attrs node(ember::detail::NoArgs{}, "NormalBackward0");
  // Complex: each part normal with std / sqrt(2), so |z - mean| has variance std^2 (as PyTorch).
  double part_std = is_complex(dtype()) ? std / std::sqrt(2.0) : std;
  return ember::detail::op_entry_inplace(
      ember::detail::Formula::Fill, *this, Tensor(),
      [&] { fill_random(*this, detail::OpKind::Normal, mean, part_std, generator); }, node);
}

Tensor& Tensor::uniform_(double from, double to, std::optional<Generator> generator) {
  EMBER_CHECK(is_floating_point(dtype()) || is_complex(dtype()), TypeError,
              "uniform_ expects a floating point or complex dtype, but got ", dtype());
  EMBER_CHECK(from <= to, ValueError, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  ember::detail::Attrs node(ember::detail::NoArgs{}, "UniformBackward0");
  return ember::detail::op_entry_inplace(
      ember::detail::Formula::Fill, *this, Tensor(),
      [&] { fill_random(*this, detail::OpKind::Uniform, from, to, generator); }, node);
}

// requires_grad is set once the values are written (a leaf that requires grad refuses in-place writes).
Tensor rand(const IntList& shape, const TensorOptions& options, std::optional<Generator> generator) {
  return empty(shape, options.requires_grad(false))
      .uniform_(0.0, 1.0, std::move(generator))
      .requires_grad_(options.requires_grad());
}
Tensor randn(const IntList& shape, const TensorOptions& options, std::optional<Generator> generator) {
  return empty(shape, options.requires_grad(false))
      .normal_(0.0, 1.0, std::move(generator))
      .requires_grad_(options.requires_grad());
}
Tensor rand_like(const Tensor& t, const TensorOptions& options, std::optional<Generator> generator) {
  return empty_like(t, options.requires_grad(false))
      .uniform_(0.0, 1.0, std::move(generator))
      .requires_grad_(options.requires_grad());
}
Tensor randn_like(const Tensor& t, const TensorOptions& options, std::optional<Generator> generator) {
  return empty_like(t, options.requires_grad(false))
      .normal_(0.0, 1.0, std::move(generator))
      .requires_grad_(options.requires_grad());
}

}  // namespace ember
