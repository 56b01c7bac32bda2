// Default collation (stack each field) and pinning of batches.
#include "data/collate.h"

#include <cstring>

#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::data::detail {
namespace {

// Contiguous cpu tensors of one dtype and shape: what a dataset of host tensors yields.
bool all_contiguous_host_alike(const std::vector<Tensor>& items) {
  const Tensor& first = items[0];
  for (const Tensor& t : items) {
    if (!t.is_cpu() || !t.is_contiguous() || t.dtype() != first.dtype() || t.sizes() != first.sizes()) return false;
  }
  return true;
}

// stack() for such items: cpu kernels run inline, so each item's bytes are final and
// copying them one after the other is the whole job (one memcpy per item, no dispatch).
Tensor stack_bytes(const std::vector<Tensor>& items) {
  const Tensor& first = items[0];
  IntList shape{static_cast<int64_t>(items.size())};
  shape.insert(shape.end(), first.sizes().begin(), first.sizes().end());
  Tensor out = empty(shape, TensorOptions(first.dtype()));
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const size_t bytes = first.nbytes();
  for (const Tensor& t : items) {
    if (bytes > 0) std::memcpy(dst, t.data_ptr(), bytes);
    dst += bytes;
  }
  return out;
}

}  // namespace

Tensor stack_items(const std::vector<Tensor>& items) {
  EMBER_CHECK(!items.empty(), ValueError, "stack expects a non-empty TensorList");
  size_t defined = 0;
  for (const Tensor& t : items) defined += t.defined() ? 1 : 0;
  if (defined == 0) return Tensor();
  EMBER_CHECK(defined == items.size(), ValueError, "collate: some items have the field and others do not");
  if (all_contiguous_host_alike(items)) return stack_bytes(items);
  return ember::stack(items, 0);
}

Example collate(const std::vector<Example>& examples) {
  std::vector<Tensor> data, target;
  data.reserve(examples.size());
  target.reserve(examples.size());
  for (const Example& e : examples) {
    data.push_back(e.data);
    target.push_back(e.target);
  }
  return {stack_items(data), stack_items(target)};
}

Example pin_batch(const Example& batch) {
  return {batch.data.defined() ? batch.data.pin_memory() : Tensor(),
          batch.target.defined() ? batch.target.pin_memory() : Tensor()};
}

}  // namespace ember::data::detail
