// Default collation (stack each field) and pinning of batches.
#include "data/collate.h"

#include "ember/errors.h"
#include "ember/ops.h"

namespace ember::data::detail {

Tensor stack_items(const std::vector<Tensor>& items) {
  EMBER_CHECK(!items.empty(), ValueError, "stack expects a non-empty TensorList");
  size_t defined = 0;
  for (const Tensor& t : items) defined += t.defined() ? 1 : 0;
  if (defined == 0) return Tensor();
  EMBER_CHECK(defined == items.size(), ValueError, "collate: some items have the field and others do not");
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
