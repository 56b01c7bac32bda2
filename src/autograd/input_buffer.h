// InputBuffer: the gradients gathered for one node before it runs.
//
// Note [Producer-consumer stream syncs]
// A gradient arrives from a producer (a node that ran on stream P, or the caller's
// current stream for an initial gradient; none for cpu work) at input `pos` of a
// consumer whose input expects it on stream C (the forward's stream on that device).
// Each slot remembers the stream R its value is ready on.
//  (A) first producer: the value is stored as it is; R = P.
//  (B) Nth producer, cuda: the sum runs on an accumulation stream S: C when the gradient
//      is on the consumer's device, else R (the earlier value's stream) when on that
//      device, else the device's current stream. S waits for R and for P (events) when
//      they differ from S; then R = S.
//  (C) cpu gradients are summed on the host; their producers finished before handing
//      them over (copies to the host block).
//  (D) when the consumer runs, its stream C waits for R of each cuda slot where R != C.
// Nothing else waits: no host synchronisation, no device-wide barrier.
#pragma once

#include <optional>
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

class InputBuffer {
 public:
  explicit InputBuffer(size_t size) : values_(size), ready_(size) {}

  /// Adds `grad` into slot `pos` of `consumer`, produced on `producer` (cases A-C).
  /// `used` collects the streams work was queued on.
  void add(const Node& consumer, size_t pos, Tensor grad, const std::optional<cuda::Stream>& producer,
           std::vector<cuda::Stream>& used);
  /// Case D, then hands the values over.
  std::vector<Tensor> take(const Node& consumer);

 private:
  std::vector<Tensor> values_;
  std::vector<std::optional<cuda::Stream>> ready_;
};

/// Makes `waiter` wait for the work queued on `producer` so far (an event), if they differ.
void sync_streams(const cuda::Stream& waiter, const std::optional<cuda::Stream>& producer);

}  // namespace ember::autograd
