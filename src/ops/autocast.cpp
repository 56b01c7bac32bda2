// Note [Autocast]
// torch.autocast gives each op a precision from three lists (aten/src/ATen/autocast_mode.cpp):
// run in the autocast dtype ("lower precision": GEMMs and convolutions, whose units are fast
// in float16/bfloat16), run in float32 (ops whose range or accuracy float16 loses: exp, log,
// pow, softmax, sums, norms, losses), or run in the widest floating type of the inputs (ops
// that must not mix types). PyTorch reaches them through the Autocast dispatch key; ember's
// ops of the lists open an AutocastScope at their entry, one row each in the op list's precision
// column (EMBER_AUTOCAST_OPS, kernels/op_list.h; kAutocastOps below),
// and call themselves again with the cast inputs while the scope suspends autocast, so the
// op's own inner ops (cdist's matmul, cross_entropy's log_softmax) run as the op calls them,
// as PyTorch's kernels run below the key. Ops in no list never look further than
// autocast_may_apply(), one thread-local load.
//
// Only floating tensors of the guard's device type other than float64 are cast ("eligible"),
// with Tensor::to, which autograd records: each gradient comes back in its parameter's dtype.
// A float32 leaf that requires grad, cast to the autocast dtype while grad mode is on, is
// cast once per outermost guard: the copy is cached by the tensor's identity (PyTorch's
// cached_cast) and the cache is dropped when the outermost guard ends. The state is per
// thread, as PyTorch's thread-local dispatch keys; autograd's engine suspends it for the
// backward pass, whose ops then run in the dtypes the forward chose.
#include "ops/autocast.h"

#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/tensor_impl.h"
#include "ember/amp.h"
#include "ember/autograd.h"
#include "ember/errors.h"

namespace ember::detail {
namespace {

struct AutocastRow {
  CastPolicy cuda;
  CastPolicy cpu;
};

// The op list's precision column (EMBER_AUTOCAST_OPS in kernels/op_list.h, with its sources):
// kAutocastOps[op] is op's row.
constexpr CastPolicy policy(std::string_view name) {
  if (name == "Lower") return CastPolicy::kLowerPrecision;
  if (name == "Float32") return CastPolicy::kFloat32;
  if (name == "Promote") return CastPolicy::kPromote;
  return CastPolicy::kNone;
}
constexpr AutocastRow kAutocastOps[] = {
#define EMBER_AUTOCAST_ROW(Op, cuda, cpu) {policy(#cuda), policy(#cpu)},
    EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ROW)
#undef EMBER_AUTOCAST_ROW
};
static_assert(policy("Lower") == CastPolicy::kLowerPrecision && policy("None") == CastPolicy::kNone);
static_assert(std::size(kAutocastOps) == static_cast<size_t>(AutocastOp::kCount),
              "kAutocastOps has one row per AutocastOp, in order");

constexpr int index_of(DeviceType type) { return type == kCUDA ? 1 : 0; }

CastPolicy policy_of(AutocastOp op, DeviceType type) {
  const AutocastRow& row = kAutocastOps[static_cast<size_t>(op)];
  return type == kCUDA ? row.cuda : row.cpu;
}

struct CacheEntry {
  Tensor source;  // held, so its address cannot be reused by another tensor while cached
  Tensor cast;
};

thread_local AutocastState state;
thread_local std::unordered_map<const TensorImpl*, CacheEntry> cast_cache;

bool eligible(const Tensor& t, DeviceType type) {
  return t.defined() && t.device().type() == type && is_floating_point(t.dtype()) && t.dtype() != kFloat64;
}

void check_dtype(DeviceType type, DType dtype) {
  EMBER_CHECK(dtype == kFloat16 || dtype == kBFloat16, TypeError, "In ", type == kCUDA ? "CUDA" : "CPU",
              " autocast, but the target dtype ", dtype, " is not supported. ", type == kCUDA ? "CUDA" : "CPU",
              " Autocast only supports dtypes of torch.float16 and torch.bfloat16.");
}

DeviceType parse_device_type(const std::string& name) {
  if (name == "cuda") return kCUDA;
  if (name == "cpu") return kCPU;
  fail<ValueError>("User specified an unsupported autocast device_type '", name, "'");
}

}  // namespace

AutocastState& autocast_state() noexcept { return state; }

AutocastScope::AutocastScope(AutocastOp op, const std::vector<Tensor>& args) {
  if (!autocast_may_apply()) return;  // the common case: no vector of pointers
  std::vector<const Tensor*> pointers;
  pointers.reserve(args.size());
  for (const Tensor& t : args) pointers.push_back(&t);
  init(op, pointers.data(), pointers.size());
}

void AutocastScope::init(AutocastOp op, const Tensor* const* args, size_t count) {
  if (!autocast_may_apply()) return;
  type_ = kCPU;
  for (const Tensor* t : std::span(args, count)) {
    if (t->defined() && t->device().is_cuda()) type_ = kCUDA;
  }
  if (!state.enabled[index_of(type_)]) return;
  const CastPolicy policy = policy_of(op, type_);
  if (policy == CastPolicy::kNone) return;
  active_ = true;
  ++state.suspended;
  const DType lower = state.dtype[index_of(type_)];
  switch (policy) {
    case CastPolicy::kLowerPrecision:
      target_ = lower;
      cast_to_target_ = true;
      break;
    case CastPolicy::kFloat32:
      target_ = kFloat32;
      cast_to_target_ = true;
      break;
    case CastPolicy::kPromote: {
      // PyTorch's prioritize(): float32 wins; inputs all in the autocast dtype stay in it.
      bool any = false;
      DType widest = lower;
      for (const Tensor* t : std::span(args, count)) {
        if (!eligible(*t, type_)) continue;
        any = true;
        if (t->dtype() != lower) widest = kFloat32;
      }
      target_ = widest;
      cast_to_target_ = any;
      break;
    }
    case CastPolicy::kNone: break;
  }
}

bool autocast_unifies(AutocastOp op, const Tensor& a, const Tensor& b) {
  if (!autocast_may_apply()) return false;
  const DeviceType type = a.device().is_cuda() || b.device().is_cuda() ? kCUDA : kCPU;
  if (!state.enabled[index_of(type)] || !eligible(a, type) || !eligible(b, type)) return false;
  const CastPolicy policy = policy_of(op, type);
  return policy == CastPolicy::kLowerPrecision || policy == CastPolicy::kFloat32;
}

AutocastScope::~AutocastScope() {
  if (active_) --state.suspended;
}

Tensor AutocastScope::cast(const Tensor& t) const {
  if (!active_ || !cast_to_target_ || !eligible(t, type_) || t.dtype() == target_) return t;
  const bool cacheable = state.cache_enabled && target_ == state.dtype[index_of(type_)] && t.dtype() == kFloat32 &&
                         t.requires_grad() && t.is_leaf() && is_grad_enabled();
  if (!cacheable) return t.to(target_);
  auto [it, inserted] = cast_cache.try_emplace(t.impl());
  // A nested guard of the other lower-precision dtype replaces the entry rather than reuse it.
  if (inserted || it->second.cast.dtype() != target_) it->second = CacheEntry{t, t.to(target_)};
  return it->second.cast;
}

std::vector<Tensor> AutocastScope::cast(const std::vector<Tensor>& ts) const {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cast(t));
  return out;
}

AutocastPropagate::AutocastPropagate(const AutocastState& from) : saved_(state) {
  for (int i = 0; i < 2; ++i) {
    state.enabled[i] = from.enabled[i];
    state.dtype[i] = from.dtype[i];
  }
  state.cache_enabled = from.cache_enabled;
  ++state.nesting;
}

AutocastPropagate::~AutocastPropagate() {
  if (saved_.nesting == 0) cast_cache.clear();
  state = saved_;
}

}  // namespace ember::detail

namespace ember {

using detail::state;

autocast::autocast(DeviceType device_type, std::optional<DType> dtype, bool enabled, std::optional<bool> cache_enabled)
    : device_type_(device_type) {
  enter(device_type, dtype, enabled, cache_enabled);
}

autocast::autocast(const std::string& device_type, std::optional<DType> dtype, bool enabled,
                   std::optional<bool> cache_enabled)
    : device_type_(detail::parse_device_type(device_type)) {
  enter(device_type_, dtype, enabled, cache_enabled);
}

void autocast::enter(DeviceType device_type, std::optional<DType> dtype, bool enabled,
                     std::optional<bool> cache_enabled) {
  const int i = detail::index_of(device_type);
  const DType target = dtype.value_or(state.dtype[i]);
  if (enabled) detail::check_dtype(device_type, target);  // before anything changes
  prev_enabled_ = state.enabled[i];
  prev_dtype_ = state.dtype[i];
  prev_cache_enabled_ = state.cache_enabled;
  state.enabled[i] = enabled;
  state.dtype[i] = target;
  state.cache_enabled = cache_enabled.value_or(state.cache_enabled);
  ++state.nesting;
}

autocast::~autocast() {
  const int i = detail::index_of(device_type_);
  if (--state.nesting == 0) detail::cast_cache.clear();
  state.enabled[i] = prev_enabled_;
  state.dtype[i] = prev_dtype_;
  state.cache_enabled = prev_cache_enabled_;
}

bool is_autocast_enabled(DeviceType device_type) { return state.enabled[detail::index_of(device_type)]; }
DType get_autocast_dtype(DeviceType device_type) { return state.dtype[detail::index_of(device_type)]; }
void set_autocast_enabled(DeviceType device_type, bool enabled) {
  state.enabled[detail::index_of(device_type)] = enabled;
}
void set_autocast_dtype(DeviceType device_type, DType dtype) {
  detail::check_dtype(device_type, dtype);
  state.dtype[detail::index_of(device_type)] = dtype;
}
bool is_autocast_cache_enabled() { return state.cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { state.cache_enabled = enabled; }
void clear_autocast_cache() { detail::cast_cache.clear(); }

}  // namespace ember
