// Contracts of the NllLoss and BatchNormStats KernelCalls (built by src/ops/nn/loss.cpp and
// src/ops/nn/batch_norm.cpp, run by cpu_loss.cpp / cpu_batch_norm.cpp and the driver's
// cuda_loss.cu).
//
// NllLoss
//   inputs[0]  {N, C, S} log-probabilities, any strides, float dtype
//   inputs[1]  {N, S} int64 class indices, any strides
//   kargs::NllLoss: ignore_index, reduction; reduction 0 ("none"):
//     outputs[0] {N, S} -input[n, target, s], 0 where target == ignore_index
//     outputs[1] {N, S} 1 where the element counts, 0 where it is ignored (input's dtype)
//   reduction 1 ("sum") / 2 ("mean"): outputs[0] and outputs[1] are single elements: the sum
//     (or the sum over the count: NaN when every element is ignored, as PyTorch) of
//     those losses, accumulated in double, and the count
//   A target outside [0, C) other than ignore_index fails the kernel with
//   "Target 10 is out of bounds." (IndexError on cpu, a device-side assert on cuda);
//   the cpu checks every target before writing anything.
//
// BatchNormStats
//   inputs[0]  {N, C, S}, any strides, float dtype
//   outputs[0] {C} mean, outputs[1] {C} biased variance, input's dtype, accumulated in double
#pragma once
