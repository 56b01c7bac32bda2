// A matrix product whose TF32 decision the caller takes (Note [Recurrent TF32] in
// nn/modules/rnn_layer.cpp: the recurrent modules follow backends::cudnn.allow_tf32 where
// matmul follows the matmul flag). Until the op list carries a precision per op, this is
// the one place outside matmul that builds a Matmul launch.
#pragma once

#include "ember/tensor.h"

namespace ember::detail {

/// a [n, k] @ b [k, m] (any strides, same device and dtype), one Matmul launch; TF32 only when
/// `allow_tf32` and the operands are float32 on a cuda device. Not recorded for autograd.
Tensor matmul_2d_with_tf32(const Tensor& a, const Tensor& b, bool allow_tf32);

}  // namespace ember::detail
