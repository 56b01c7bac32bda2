// Default collation (stack each field) and pinning of batches.
#include "data/collate.h"

#include "core/tensor_impl.h"
#include "ember/errors.h"

namespace ember::data::detail {

Tensor stack_items(const std::vector<Tensor>& items) {
  EMBER_CHECK(!items.empty(), ValueError, "stack expects a non-empty TensorList");
  size_t defined = 0;
  for (const Tensor& t : items) defined += t.defined() ? 1 : 0;
  if (defined == 0) return Tensor();
  EMBER_CHECK(defined == items.size(), ValueError, "collate: some items have the field and others do not");
  const Tensor& first = items[0];
  DType dtype = first.dtype();
  for (size_t i = 1; i < items.size(); ++i) {
    const Tensor& t = items[i];
    EMBER_CHECK(t.sizes() == first.sizes(), ValueError, "stack expects each tensor to be equal size, but got ",
                ember::detail::IntListPrinter{first.sizes()}, " at entry 0 and ",
                ember::detail::IntListPrinter{t.sizes()}, " at entry ", i);
    EMBER_CHECK(t.device() == first.device(), DeviceError,
                "Expected all tensors to be on the same device, but found at least two devices, ", first.device(),
                " and ", t.device(), "!");
    dtype = promote_types(dtype, t.dtype());
  }
  IntList shape{static_cast<int64_t>(items.size())};
  shape.insert(shape.end(), first.sizes().begin(), first.sizes().end());
  Tensor out = ember::detail::make_tensor(shape, dtype, first.device());
  for (size_t i = 0; i < items.size(); ++i) out.select(0, static_cast<int64_t>(i)).copy_(items[i]);
  return out;
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
