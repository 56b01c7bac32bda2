#include "autograd/input_buffer.h"

#include <algorithm>

#include "ember/cuda.h"
#include "ember/ops.h"

namespace ember::autograd {

void sync_streams(const cuda::Stream& waiter, const std::optional<cuda::Stream>& producer) {
  if (producer && !(*producer == waiter)) waiter.wait_stream(*producer);
}

namespace {
void note_used(std::vector<cuda::Stream>& used, const cuda::Stream& s) {
  if (std::find(used.begin(), used.end(), s) == used.end()) used.push_back(s);
}
}  // namespace

void InputBuffer::add(const Node& consumer, size_t pos, Tensor grad, const std::optional<cuda::Stream>& producer,
                      std::vector<cuda::Stream>& used) {
  if (!grad.defined()) return;
  Tensor& slot = values_.at(pos);
  if (!slot.defined()) {  // (A)
    slot = std::move(grad);
    ready_[pos] = producer;
    return;
  }
  if (!grad.is_cuda()) {  // (C)
    slot = slot + grad;
    return;
  }
  // (B)
  int device = grad.get_device();
  const auto& expected = consumer.internals().inputs.at(pos).stream;
  cuda::Stream stream = expected && expected->device_index() == device         ? *expected
                        : ready_[pos] && ready_[pos]->device_index() == device ? *ready_[pos]
                                                                               : cuda::current_stream(device);
  sync_streams(stream, ready_[pos]);
  sync_streams(stream, producer);
  // The blocks were allocated on other streams: keep the allocator from reusing them
  // before this stream's reads are done.
  if (ready_[pos] && !(*ready_[pos] == stream)) slot.record_stream(stream);
  if (producer && !(*producer == stream)) grad.record_stream(stream);
  {
    cuda::StreamGuard guard(stream);
    slot = slot + grad;
  }
  ready_[pos] = stream;
  note_used(used, stream);
}

std::vector<Tensor> InputBuffer::take(const Node& consumer) {
  const auto& inputs = consumer.internals().inputs;
  for (size_t pos = 0; pos < values_.size(); ++pos) {  // (D)
    if (!values_[pos].defined() || !values_[pos].is_cuda()) continue;
    const auto& expected = inputs.at(pos).stream;
    if (expected && ready_[pos] && !(*ready_[pos] == *expected)) {
      sync_streams(*expected, ready_[pos]);
      values_[pos].record_stream(*expected);
    }
  }
  return std::move(values_);
}

}  // namespace ember::autograd
