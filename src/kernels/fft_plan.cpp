#include "kernels/fft_plan.h"

namespace ember::detail::fft {

IntList PlanKey::in_sizes() const {
  IntList sizes = signal_sizes;
  if (kind == TransformKind::C2R) sizes.back() = sizes.back() / 2 + 1;
  return sizes;
}

IntList PlanKey::out_sizes() const {
  IntList sizes = signal_sizes;
  if (kind == TransformKind::R2C) sizes.back() = sizes.back() / 2 + 1;
  return sizes;
}

size_t PlanKeyHash::operator()(const PlanKey& key) const noexcept {
  // FNV-1a over every field; keys are small, so this is cheap next to a lookup miss.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  mix(static_cast<int64_t>(key.kind));
  mix(key.forward);
  mix(static_cast<int64_t>(key.precision));
  for (const IntList* list : {&key.signal_sizes, &key.in_strides, &key.out_strides}) {
    mix(static_cast<int64_t>(list->size()));
    for (int64_t v : *list) mix(v);
  }
  mix(key.batch);
  mix(key.in_dist);
  mix(key.out_dist);
  return static_cast<size_t>(h);
}

}  // namespace ember::detail::fft
