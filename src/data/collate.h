// Default collation and pinning of batches.
#pragma once

#include <cstddef>
#include <vector>

#include "ember/data.h"

namespace ember::data::detail {

/// ember::stack(items): equal sizes, one device, the promoted dtype. All undefined gives
/// an undefined tensor (an Example without that field).
Tensor stack_items(const std::vector<Tensor>& items);
/// default_collate: each field of the examples stacked.
Example collate(const std::vector<Example>& examples);
/// The batch with both fields in pinned host memory (cpu tensors only).
Example pin_batch(const Example& batch);

}  // namespace ember::data::detail
