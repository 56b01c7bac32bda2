// Autocast's op-layer side (Note [Autocast] in autocast.cpp): the per-thread state and the
// scope an op in one of the lists opens at its entry.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string_view>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/tensor.h"
#include "kernels/op_list.h"

namespace ember::detail {

/// What autocast does to an op's floating inputs (PyTorch's CastPolicy).
enum class CastPolicy : uint8_t {
  kNone,            // in no list: the op runs in its inputs' types
  kLowerPrecision,  // to the autocast dtype
  kFloat32,         // to float32
  kPromote,         // to the widest floating type among them
};

/// The ops of PyTorch's lists that ember has: the op list's precision column,
/// EMBER_AUTOCAST_OPS (kernels/op_list.h), one enumerator k<Op> per row, in its order.
enum class AutocastOp : uint8_t {
#define EMBER_AUTOCAST_ID(Op, ...) k##Op,
  EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ID)
#undef EMBER_AUTOCAST_ID
      kCount,
};

/// The row of the precision column named `op` ("Exp", "Atan2": an op list row's Kind), or
/// kCount where autocast leaves that op alone: entry points made from a family list find
/// their policy here, at compile time.
constexpr AutocastOp autocast_op_named(std::string_view op) {
  constexpr std::string_view kNames[] = {
#define EMBER_AUTOCAST_NAME(Op, ...) #Op,
      EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_NAME)
#undef EMBER_AUTOCAST_NAME
  };
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] == op) return static_cast<AutocastOp>(i);
  }
  return AutocastOp::kCount;
}

struct AutocastState {
  bool enabled[2] = {false, false};  // by DeviceType: cpu, cuda
  DType dtype[2] = {kBFloat16, kFloat16};
  bool cache_enabled = true;
  int nesting = 0;    // live autocast guards
  int suspended = 0;  // > 0 inside an op of a list, and in autograd's backward
};

/// This thread's state.
AutocastState& autocast_state() noexcept;

/// Whether any op of this thread might be cast now (the one check on an op's path).
inline bool autocast_may_apply() noexcept {
  const AutocastState& s = autocast_state();
  return (s.enabled[0] || s.enabled[1]) && s.suspended == 0;
}

/// Opened at the entry of an op of a list. Active when autocast is on for the device type of
/// its tensors (cuda if any is a cuda tensor) and the op has a policy there; then it
/// suspends autocast until it closes (the op's own inner ops run as called, as PyTorch's
/// kernels run below the Autocast key), and `cast(t)` gives each input as the op must see
/// it. The op then calls itself with the cast inputs.
class AutocastScope {
 public:
  AutocastScope(AutocastOp op, std::initializer_list<const Tensor*> args) { init(op, args.begin(), args.size()); }
  AutocastScope(AutocastOp op, const std::vector<Tensor>& args);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  explicit operator bool() const noexcept { return active_; }
  Tensor cast(const Tensor& t) const;
  std::vector<Tensor> cast(const std::vector<Tensor>& ts) const;

 private:
  void init(AutocastOp op, const Tensor* const* args, size_t count);
  bool active_ = false;
  DeviceType type_ = kCPU;
  DType target_ = kFloat32;
  bool cast_to_target_ = false;  // kNone for promote when nothing is eligible
};

/// Whether an AutocastScope of `op` opened now would cast both `a` and `b` to one dtype (the
/// recurrent modules accept a state of another floating dtype than their input then, as
/// PyTorch's autocast casts both before its dtype check).
bool autocast_unifies(AutocastOp op, const Tensor& a, const Tensor& b);

/// Suspends autocast while it lives (autograd's backward pass).
class AutocastSuspend {
 public:
  AutocastSuspend() noexcept { ++autocast_state().suspended; }
  ~AutocastSuspend() { --autocast_state().suspended; }
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;
};

/// Carries a thread's autocast settings into another thread while it lives (DataParallel's
/// replica threads, as PyTorch's parallel_apply enters the caller's autocast in each).
class AutocastPropagate {
 public:
  explicit AutocastPropagate(const AutocastState& from);
  ~AutocastPropagate();
  AutocastPropagate(const AutocastPropagate&) = delete;
  AutocastPropagate& operator=(const AutocastPropagate&) = delete;

 private:
  AutocastState saved_;
};

}  // namespace ember::detail
