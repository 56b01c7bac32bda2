// KernelPayload: the op-specific state a KernelCall carries (an FFT plan, a convolution or
// pooling geometry, a fused optimizer step), typed.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace ember::detail {

enum class OpKind : uint8_t;  // kernels/kernel_call.h
struct FusedStep;             // kernels/optimizer_step.h
namespace fft {
class Plan;  // fft/plan_cache.h: the backend's plan derives from it
}  // namespace fft
struct ConvGeometry;  // kernels/conv_geometry.h
struct PoolGeometry;  // kernels/pool_geometry.h

/// The kinds of payload; None: the launch carries none.
enum class PayloadKind : uint8_t { None, FftPlan, ConvGeometry, PoolGeometry, FusedStep };

/// "an FFT plan", "a ConvGeometry", ...: for internal errors.
const char* payload_kind_name(PayloadKind kind) noexcept;

template <typename T>
inline constexpr PayloadKind payload_kind_of = PayloadKind::None;  // not a payload type
template <>
inline constexpr PayloadKind payload_kind_of<fft::Plan> = PayloadKind::FftPlan;
template <>
inline constexpr PayloadKind payload_kind_of<ConvGeometry> = PayloadKind::ConvGeometry;
template <>
inline constexpr PayloadKind payload_kind_of<PoolGeometry> = PayloadKind::PoolGeometry;
template <>
inline constexpr PayloadKind payload_kind_of<FusedStep> = PayloadKind::FusedStep;

template <typename T>
concept PayloadType = payload_kind_of<std::remove_const_t<T>>
!= PayloadKind::None;

/// Note [Typed kernel payload]
/// A KernelPayload holds a shared_ptr<const T> of one of the payload types above, tagged
/// with its kind: it is made only from such a pointer, and read only through get<T>(),
/// which checks the tag and names the kind it expected in an internal error. It is a
/// tagged pointer rather than a std::variant of shared_ptrs on purpose: copying a
/// KernelCall onto an emulated stream's queue (Note [Emulated queue pool]) copies it,
/// and a shared_ptr plus a byte copies without the variant's visitation (an indirect
/// call per copy in libstdc++). A launch without payload holds a null pointer: nothing
/// is allocated, copying it touches no reference count (Note [Allocation-free kernel
/// arguments]).
class KernelPayload {
 public:
  KernelPayload() noexcept = default;
  KernelPayload(std::nullptr_t) noexcept {}
  template <PayloadType T>
  KernelPayload(std::shared_ptr<T> payload) noexcept  // NOLINT: implicit, as the shared_ptr it holds
      : kind_(payload ? payload_kind_of<std::remove_const_t<T>> : PayloadKind::None), ptr_(std::move(payload)) {}

  PayloadKind kind() const noexcept { return kind_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  void reset() noexcept {
    ptr_.reset();
    kind_ = PayloadKind::None;
  }

  /// The payload, which must be a T (an internal error naming `op`, T's kind and the kind
  /// held otherwise). For an FFT plan T is fft::Plan; the backend casts to its own plan.
  template <PayloadType T>
  const T& get(OpKind op) const {
    if (kind_ != payload_kind_of<T>) [[unlikely]]
      wrong_kind(op, payload_kind_of<T>);
    return *static_cast<const T*>(ptr_.get());
  }

 private:
  [[noreturn]] void wrong_kind(OpKind op, PayloadKind expected) const;

  PayloadKind kind_ = PayloadKind::None;
  std::shared_ptr<const void> ptr_;
};

}  // namespace ember::detail
