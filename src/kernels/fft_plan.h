// The FFT kernel's contract: the transform geometry (PlanKey) and the prepared plan a
// backend makes for it (Plan), carried by the FFT KernelCall's payload. Backends make
// plans through Backend::create_fft_plan; src/fft caches them (Note [FFT plan cache]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ember/dtype.h"
#include "ember/tensor.h"

namespace ember::detail::fft {

enum class TransformKind : uint8_t { C2C, R2C, C2R };

/// The geometry and configuration of one batched transform. Strides and distances are in
/// elements of the input and output element types (complex elements for complex sides).
struct PlanKey {
  TransformKind kind = TransformKind::C2C;
  bool forward = true;              // C2C only; R2C is always forward, C2R always inverse
  DType precision = kFloat32;       // kFloat32 or kFloat64: the real type of the transform
  IntList signal_sizes;             // logical sizes (real lengths for R2C/C2R), rank 1..3
  IntList in_strides, out_strides;  // per signal dim
  int64_t batch = 1;
  int64_t in_dist = 0, out_dist = 0;  // between consecutive batch items

  bool operator==(const PlanKey&) const = default;
  /// Sizes of the input and output signals (the complex side of R2C/C2R is n/2+1 long in the last dim).
  IntList in_sizes() const;
  IntList out_sizes() const;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const noexcept;
};

/// A prepared transform; backend-specific subclasses execute it.
class Plan {
 public:
  explicit Plan(PlanKey key) : key_(std::move(key)) {}
  virtual ~Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  const PlanKey& key() const noexcept { return key_; }

 private:
  PlanKey key_;
};

}  // namespace ember::detail::fft
