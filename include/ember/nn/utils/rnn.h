// torch.nn.utils.rnn: packed sequences, the input of a recurrent module whose sequences
// have different lengths.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "ember/device.h"
#include "ember/tensor.h"

namespace ember::nn::utils::rnn {

/// A batch of sequences sorted by decreasing length, packed time step by time step: data
/// holds batch_sizes[0] rows of the first step, then batch_sizes[1] rows of the second,
/// and so on. batch_sizes is a cpu int64 tensor, whatever device data is on. sorted_indices
/// maps the packed order back to the caller's (sorted_indices[k] is the caller's batch index
/// of packed sequence k); unsorted_indices is its inverse. Both are undefined when the batch
/// was given sorted (enforce_sorted), as PyTorch's None.
class PackedSequence {
 public:
  PackedSequence() = default;
  /// ValueError when batch_sizes is not a 1-D cpu int64 tensor (PyTorch's message); an
  /// undefined unsorted_indices is computed from sorted_indices.
  PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices = {}, Tensor unsorted_indices = {});

  const Tensor& data() const noexcept { return data_; }
  const Tensor& batch_sizes() const noexcept { return batch_sizes_; }
  const Tensor& sorted_indices() const noexcept { return sorted_indices_; }
  const Tensor& unsorted_indices() const noexcept { return unsorted_indices_; }
  /// data and the indices on `device`; batch_sizes stays on the cpu.
  PackedSequence to(Device device, bool non_blocking = false) const;
  bool is_cuda() const { return data_.is_cuda(); }

 private:
  Tensor data_, batch_sizes_, sorted_indices_, unsorted_indices_;
};

/// Packs `input` [T, B, *] ([B, T, *] batch_first) whose sequence b has lengths[b] valid
/// steps. lengths: a 1-D integer tensor on any device (a cuda one is copied to the host, a
/// synchronization; PyTorch refuses it) or a list. enforce_sorted: lengths must be
/// decreasing (else ValueError with PyTorch's message); otherwise the batch is sorted here
/// and the permutation kept. Lengths of 0, longer than T, or an empty input are ValueErrors.
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);

/// The inverse: (padded [T, B, *] or [B, T, *], lengths as a cpu int64 tensor), in the
/// caller's batch order, padded with padding_value up to total_length steps when given
/// (ValueError if it is shorter than the longest sequence).
std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                              double padding_value = 0.0,
                                              std::optional<int64_t> total_length = std::nullopt);

/// Stacks sequences [L_i, *] into [max L, N, *] ([N, max L, *] batch_first), padding the
/// shorter ones with padding_value.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

/// pack_padded_sequence(pad_sequence(sequences), their lengths, false, enforce_sorted).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace ember::nn::utils::rnn
