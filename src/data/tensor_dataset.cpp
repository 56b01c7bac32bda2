// TensorDataset: rows of two tensors.
#include "ember/data.h"
#include "ember/errors.h"

namespace ember::data {

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  EMBER_CHECK(data_.defined() && target_.defined(), ValueError, "TensorDataset: both tensors must be defined");
  EMBER_CHECK(data_.dim() >= 1 && target_.dim() >= 1, ValueError,
              "TensorDataset: tensors need a first dimension to index, but got ", data_.dim(), " and ", target_.dim(),
              " dimensions");
  EMBER_CHECK(data_.size(0) == target_.size(0), ValueError, "Size mismatch between tensors: ", data_.size(0),
              " rows of data and ", target_.size(0), " of target");
}

size_t TensorDataset::size() const { return static_cast<size_t>(data_.size(0)); }

Example TensorDataset::get(size_t index) const {
  EMBER_CHECK(index < size(), IndexError, "index ", index, " is out of bounds for dimension 0 with size ", size());
  auto i = static_cast<int64_t>(index);
  return {data_.select(0, i), target_.select(0, i)};
}

}  // namespace ember::data
