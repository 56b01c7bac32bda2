#include "distributed/collective_checks.h"

#include <cstring>

#include "ember/errors.h"
#include "ops/overlap.h"

namespace ember::detail::distributed {
namespace {

/// Sizes as PyTorch's c10d prints them: "(3, 2)", "(6)", "()".
std::string sizes_text(const Tensor& t) {
  std::string out = "(";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.sizes()[d]);
  return out + ")";
}

}  // namespace

void check_list(const char* op, const char* what, const std::vector<Tensor>& list, const Tensor& single,
                int world_size) {
  EMBER_CHECK(single.defined(), ValueError, op, ": expected a defined tensor");
  EMBER_CHECK(static_cast<int>(list.size()) == world_size, ValueError, op, ": requires ", world_size, " ", what,
              " tensors (one per rank), got ", list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const Tensor& t = list[i];
    EMBER_CHECK(t.defined(), ValueError, op, ": expected a defined tensor");
    EMBER_CHECK(t.dtype() == single.dtype(), ValueError, op, ": invalid tensor type at index ", i, " (expected ",
                dtype_name(single.dtype()), ", got ", dtype_name(t.dtype()), ")");
    EMBER_CHECK(t.sizes() == single.sizes(), ValueError, op, ": invalid tensor size at index ", i, " (expected ",
                sizes_text(single), ", got ", sizes_text(t), ")");
  }
}

void check_writable(const Tensor& t) { check_no_internal_overlap(t); }

Tensor dense_of(const Tensor& t) { return !t.defined() || t.is_contiguous() ? t : t.detach().contiguous(); }

void write_into(const Tensor& target, const void* source) {
  const auto element = static_cast<int64_t>(target.element_size());
  const int64_t n = target.numel();
  auto* out = static_cast<uint8_t*>(target.data_ptr());
  const auto* in = static_cast<const uint8_t*>(source);
  if (n == 0 || out == in) return;
  if (target.is_contiguous()) {
    std::memcpy(out, in, static_cast<size_t>(n * element));
    return;
  }
  const int64_t dims = target.dim();
  std::vector<int64_t> index(static_cast<size_t>(dims), 0);
  int64_t offset = 0;  // of index, in elements
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + offset * element, in + i * element, static_cast<size_t>(element));
    for (int64_t d = dims - 1; d >= 0; --d) {  // the next index, last dimension fastest
      const auto k = static_cast<size_t>(d);
      offset += target.strides()[k];
      if (++index[k] < target.sizes()[k]) break;
      offset -= index[k] * target.strides()[k];
      index[k] = 0;
    }
  }
}

}  // namespace ember::detail::distributed
