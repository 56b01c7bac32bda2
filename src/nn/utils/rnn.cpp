// torch.nn.utils.rnn: packing and padding as one row gather each (index_select), so
// gradients flow through them like through any op.
#include "ember/nn/utils/rnn.h"

#include <algorithm>
#include <numeric>

#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::nn::utils::rnn {
namespace {

Tensor index_tensor(const std::vector<int64_t>& values, Device device) {
  return tensor(TensorData(values), TensorOptions(kInt64).device(device))
      .reshape({static_cast<int64_t>(values.size())});
}

// An int64 cpu tensor of n elements to fill on the host. Allocated before it is filled, so a
// count beyond memory is the allocator's OutOfMemoryError (as PyTorch's packing allocates its
// result first), not a host vector's std::bad_alloc or a process grown until it is killed.
Tensor host_indices(int64_t n) { return empty({n}, TensorOptions(kInt64)); }

// a * b, or OutOfMemoryError when it does not fit in int64 (no tensor can have that many rows).
int64_t checked_rows(int64_t a, int64_t b, const char* what) {
  int64_t n = 0;
  EMBER_CHECK(!__builtin_mul_overflow(a, b, &n), OutOfMemoryError, what, ": ", a, " x ", b,
              " rows do not fit in memory");
  return n;
}

// The inverse of a permutation of 0..n-1; an index out of range (negative ones too) is PyTorch's
// error (its invert_permutation scatters), a repeated one is refused as not a permutation.
std::vector<int64_t> invert(const std::vector<int64_t>& permutation) {
  const auto n = static_cast<int64_t>(permutation.size());
  std::vector<int64_t> inverse(permutation.size(), -1);
  for (size_t k = 0; k < permutation.size(); ++k) {
    const int64_t p = permutation[k];
    EMBER_CHECK(p >= 0 && p < n, IndexError, "index ", p, " is out of bounds for dimension 0 with size ", n);
    EMBER_CHECK(inverse[static_cast<size_t>(p)] < 0, ValueError, "sorted_indices is not a permutation: ", p,
                " appears twice");
    inverse[static_cast<size_t>(p)] = static_cast<int64_t>(k);
  }
  return inverse;
}

// batch_sizes as packing makes them: positive, non-increasing, summing to the data's rows (an
// RNN or pad_packed_sequence over others would read outside the data or mix sequences).
void check_batch_sizes(const Tensor& batch_sizes, const Tensor& data) {
  const int64_t rows = data.defined() && data.dim() > 0 ? data.size(0) : 0;
  const Tensor held = batch_sizes.contiguous();  // alive while `sizes` is read
  const int64_t* sizes = held.data_ptr<int64_t>();
  int64_t packed = 0;
  for (int64_t t = 0; t < batch_sizes.numel(); ++t) {
    EMBER_CHECK(sizes[t] > 0 && (t == 0 || sizes[t] <= sizes[t - 1]), ValueError,
                "PackedSequence: batch_sizes must be positive and non-increasing, but batch_sizes[", t, "] is ",
                sizes[t]);
    EMBER_CHECK(!__builtin_add_overflow(packed, sizes[t], &packed) && packed <= rows, ValueError,
                "PackedSequence: batch_sizes sum to more than the ", rows, " rows of the packed data");
  }
  EMBER_CHECK(packed == rows, ValueError, "PackedSequence: batch_sizes sum to ", packed, ", but the packed data has ",
              rows, " rows");
}

// input's shape with its first two dims (time and batch, in either order) merged.
IntList merged_shape(const Tensor& input) {
  IntList shape{input.size(0) * input.size(1)};
  for (int64_t d = 2; d < input.dim(); ++d) shape.push_back(input.size(d));
  return shape;
}

}  // namespace

PackedSequence::PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices, Tensor unsorted_indices)
    : data_(std::move(data)),
      batch_sizes_(std::move(batch_sizes)),
      sorted_indices_(std::move(sorted_indices)),
      unsorted_indices_(std::move(unsorted_indices)) {
  EMBER_CHECK(batch_sizes_.defined() && batch_sizes_.device().is_cpu(), ValueError,
              "batch_sizes should always be on CPU. Instances of PackedSequence should never be created manually. "
              "They should be instantiated by functions like pack_sequence and pack_padded_sequences in "
              "nn.utils.rnn. https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence");
  EMBER_CHECK(batch_sizes_.dim() == 1 && batch_sizes_.dtype() == kInt64, ValueError,
              "batch_sizes should be a 1-D int64 tensor, but got a ", batch_sizes_.dim(), "-D ", batch_sizes_.dtype(),
              " tensor");
  check_batch_sizes(batch_sizes_, data_);
  if (sorted_indices_.defined() && !unsorted_indices_.defined()) {
    EMBER_CHECK(sorted_indices_.dim() == 1 && sorted_indices_.dtype() == kInt64, ValueError,
                "sorted_indices should be a 1-D int64 tensor, but got a ", sorted_indices_.dim(), "-D ",
                sorted_indices_.dtype(), " tensor");
    unsorted_indices_ = index_tensor(invert(sorted_indices_.to_vector<int64_t>()), sorted_indices_.device());
  }
}

PackedSequence PackedSequence::to(Device device, bool non_blocking) const {
  auto move = [&](const Tensor& t) { return t.defined() ? t.to(device, non_blocking) : t; };
  return PackedSequence(move(data_), batch_sizes_, move(sorted_indices_), move(unsorted_indices_));
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  EMBER_CHECK(lengths.dim() == 1 && !is_floating_point(lengths.dtype()) && !is_complex(lengths.dtype()), ValueError,
              "'lengths' argument should be a 1D CPU int64 tensor, but got ", lengths.dim(), "D ", lengths.device(),
              " ", lengths.dtype(), " tensor");
  // Unlike PyTorch, lengths on a cuda device are accepted: copied here (a synchronization).
  return pack_padded_sequence(input, lengths.to(kInt64).cpu().to_vector<int64_t>(), batch_first, enforce_sorted);
}

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths_in, bool batch_first,
                                    bool enforce_sorted) {
  EMBER_CHECK(input.dim() >= 2, ValueError, "pack_padded_sequence: expected input of at least 2 dimensions, got ",
              input.dim());
  const int64_t steps = input.size(batch_first ? 1 : 0), batch = input.size(batch_first ? 0 : 1);
  EMBER_CHECK(input.numel() > 0, ValueError, "Cannot pack empty tensors.");
  const auto count = static_cast<int64_t>(lengths_in.size());
  EMBER_CHECK(count == batch, ValueError, "Expected `len(lengths)` to be equal to batch_size, but got ", count,
              " (batch_size=", batch, ")");
  std::vector<int64_t> order(lengths_in.size());
  std::iota(order.begin(), order.end(), 0);
  if (!enforce_sorted) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths_in[a] > lengths_in[b]; });
  }
  std::vector<int64_t> lengths(lengths_in.size());
  for (size_t k = 0; k < order.size(); ++k) lengths[k] = lengths_in[static_cast<size_t>(order[k])];
  const int64_t shortest = *std::min_element(lengths.begin(), lengths.end());
  EMBER_CHECK(shortest > 0, ValueError,
              "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0");
  for (size_t k = 0; k + 1 < lengths.size(); ++k) {
    EMBER_CHECK(lengths[k] >= lengths[k + 1], ValueError,
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
                "if you do not need ONNX exportability.");
  }
  // PyTorch 1.13 reads past the end of the input here; refused instead.
  EMBER_CHECK(lengths[0] <= steps, ValueError, "Expected all lengths to be at most the padded sequence length ", steps,
              ", but found an element in 'lengths' that is ", lengths[0]);

  // Row (t, k) of the packed data is row (t, order[k]) of the input, merged to one dim. The
  // index and batch sizes are allocated first (each length is at most steps, so no sum overflows).
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  Tensor rows_index = host_indices(total), sizes = host_indices(lengths[0]);
  int64_t* rows = rows_index.data_ptr<int64_t>();
  int64_t* batch_sizes = sizes.data_ptr<int64_t>();
  for (int64_t t = 0; t < lengths[0]; ++t) {
    int64_t live = 0;
    while (live < batch && lengths[static_cast<size_t>(live)] > t) {
      const int64_t b = order[static_cast<size_t>(live)];
      *rows++ = batch_first ? b * steps + t : t * batch + b;
      ++live;
    }
    batch_sizes[t] = live;
  }
  Tensor data = input.reshape(merged_shape(input)).index_select(0, rows_index.to(input.device()));
  if (enforce_sorted) return PackedSequence(data, sizes);
  return PackedSequence(data, sizes, index_tensor(order, input.device()));
}

std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                              std::optional<int64_t> total_length) {
  const std::vector<int64_t> batch_sizes = sequence.batch_sizes().to_vector<int64_t>();
  const auto longest = static_cast<int64_t>(batch_sizes.size());
  int64_t steps = longest;
  if (total_length) {
    EMBER_CHECK(*total_length >= longest, ValueError,
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                "total_length=",
                *total_length, " and max sequence length being ", longest);
    steps = *total_length;
  }
  const Tensor& data = sequence.data();
  // batch_sizes were checked against the data when the sequence was made; the data may be a
  // broadcast view of more rows than the host can count, so every array below is allocated first.
  const int64_t batch = batch_sizes.empty() ? 0 : batch_sizes[0], rows = data.size(0);
  Tensor position_t;  // packed index of the caller's sequence j
  if (sequence.unsorted_indices().defined()) {
    const Tensor& unsorted = sequence.unsorted_indices();
    EMBER_CHECK(unsorted.numel() == batch, ValueError, "pad_packed_sequence: unsorted_indices has ", unsorted.numel(),
                " elements for a batch of ", batch);
    position_t = unsorted.to(kInt64).cpu().contiguous().reshape({batch});
    const int64_t* k = position_t.data_ptr<int64_t>();
    for (int64_t j = 0; j < batch; ++j) {
      EMBER_CHECK(k[j] >= 0 && k[j] < batch, IndexError, "index ", k[j], " is out of bounds for dimension 0 with size ",
                  batch);
    }
  } else {
    position_t = host_indices(batch);
    std::iota(position_t.data_ptr<int64_t>(), position_t.data_ptr<int64_t>() + batch, int64_t{0});
  }
  const int64_t* position = position_t.data_ptr<int64_t>();
  std::vector<int64_t> offsets(batch_sizes.size(), 0);
  for (size_t t = 1; t < batch_sizes.size(); ++t) offsets[t] = offsets[t - 1] + batch_sizes[t - 1];
  // Each padded row gathers its packed row, or the padding row appended after the data.
  Tensor index_rows = host_indices(checked_rows(steps, batch, "pad_packed_sequence"));
  int64_t* index = index_rows.data_ptr<int64_t>();
  std::fill_n(index, index_rows.numel(), rows);
  Tensor lengths_t = host_indices(batch);
  int64_t* lengths = lengths_t.data_ptr<int64_t>();
  for (int64_t j = 0; j < batch; ++j) {
    const int64_t k = position[j];
    lengths[j] = 0;
    for (int64_t t = 0; t < longest && batch_sizes[static_cast<size_t>(t)] > k; ++t) {
      index[batch_first ? j * steps + t : t * batch + j] = offsets[static_cast<size_t>(t)] + k;
      ++lengths[j];
    }
  }
  IntList pad_shape = data.sizes();
  pad_shape[0] = 1;
  Tensor source = cat({data, data.new_full(pad_shape, padding_value)}, 0);
  IntList shape = data.sizes();
  shape[0] = batch_first ? steps : batch;
  shape.insert(shape.begin(), batch_first ? batch : steps);
  Tensor padded = source.index_select(0, index_rows.to(data.device())).view(shape);
  return {padded, lengths_t};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  EMBER_CHECK(!sequences.empty(), ValueError, "received an empty list of sequences");
  int64_t longest = 0;
  for (const Tensor& s : sequences) {
    EMBER_CHECK(s.dim() >= 1, ValueError, "pad_sequence: expected sequences of at least 1 dimension, got ", s.dim());
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    if (s.size(0) == longest) {
      padded.push_back(s);
      continue;
    }
    IntList shape = s.sizes();
    shape[0] = longest - s.size(0);
    padded.push_back(cat({s, s.new_full(shape, padding_value)}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, false, enforce_sorted);
}

}  // namespace ember::nn::utils::rnn
