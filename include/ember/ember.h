// The whole public API of ember.
#pragma once

#include "ember/amp.h"  // autocast, GradScaler
#include "ember/autograd.h"
#include "ember/backends.h"
#include "ember/char_data.h"
#include "ember/cuda.h"
#include "ember/data.h"
#include "ember/device.h"
#include "ember/distributed.h"
#include "ember/dtype.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/fft.h"
#include "ember/generator.h"
#include "ember/linalg_distance.h"  // cdist, tensordot
#include "ember/nn.h"
#include "ember/nn/functional/sampling.h"  // affine_grid, grid_sample
#include "ember/nn/modules/adaptive.h"     // adaptive log-softmax
#include "ember/nn/modules/rnn.h"          // recurrent networks and packed sequences
#include "ember/ops.h"
#include "ember/optim.h"
#include "ember/sanitizer.h"
#include "ember/scalar.h"
#include "ember/serialize.h"
#include "ember/stream.h"
#include "ember/tensor.h"
#include "ember/tensor_options.h"

// Allocator modes.
#include "ember/cuda_allocator.h"
