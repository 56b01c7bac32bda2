// PyTorch's tensor repr (torch/_tensor_str.py) as a pure function over host memory.
//
// Tensor::str() copies the tensor to a host buffer and calls format_tensor;
// keeping the algorithm free of devices and streams lets it be tested on any
// buffer. The output matches Python's repr(tensor) character for character
// under PyTorch's default print options: precision 4, summarisation past 1000
// elements with 3 edge items per dimension, 80-column lines, scientific
// notation when the magnitudes call for it, and the device/dtype/size suffixes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"

namespace ember::detail {

/// torch.set_printoptions; the defaults are PyTorch's.
struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;  // summarise when numel exceeds this
  int64_t edgeitems = 3;     // items kept at each end of a summarised dimension
  int64_t linewidth = 80;
};

/// repr of the tensor whose element 0 is at `data` (host memory) with the
/// given sizes and strides (in elements; empty strides mean contiguous).
/// `device` only decides the device suffix; the data is always read from host.
std::string format_tensor(const void* data, DType dtype, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, Device device, const PrintOptions& options = {});

}  // namespace ember::detail
