// Neural-network building blocks: functional ops, modules, initialisation.
#pragma once

#include "ember/nn/init.h"
#include "ember/nn/module.h"
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/container.h"
#include "ember/nn/modules/conv.h"
#include "ember/nn/modules/flatten.h"
#include "ember/nn/modules/linear.h"
#include "ember/tensor.h"

namespace ember {

/// 2-D convolution (NCHW input, OIHW weight), as torch.nn.functional.conv2d. bias may be
/// undefined. Float32 convolutions round inputs to TF32 when backends::cudnn.allow_tf32.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const IntList& stride = {1, 1}, const IntList& padding = {0, 0},
              const IntList& dilation = {1, 1}, int64_t groups = 1);

}  // namespace ember
