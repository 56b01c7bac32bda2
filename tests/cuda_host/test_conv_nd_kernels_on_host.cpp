// The driver's Im2Col and Col2Im (cuda_im2col.cu) run on the host against the
// cpu's (cpu_im2col.cpp) for 1-D and 3-D convolutions (2-D:
// test_cuda_kernels_on_host.cpp and test_training_kernels_on_host.cpp):
// strides, padding, dilation, strided inputs and channel-major columns, float32, float64,
// float16 and bfloat16 (Note [Convolution spatial dims], Note [Half convolutions]).
#include "compare_with_cpu.h"
#include "ops/nn/backward_kernels.h"

namespace ember::host_test {
namespace {

struct ConvNdCase {
  IntList input;  // {N, C, spatial...}
  IntList kernel, stride, pad, dilation;
};

detail::ConvGeometry geometry_of(const ConvNdCase& c) {
  IntList out;
  for (size_t d = 0; d < c.kernel.size(); ++d)
    out.push_back((c.input[2 + d] + 2 * c.pad[d] - c.dilation[d] * (c.kernel[d] - 1) - 1) / c.stride[d] + 1);
  return detail::nn::conv_geometry(c.kernel, c.stride, c.pad, c.dilation, out);
}

TEST(ConvNdKernelsOnHost, Im2ColAndCol2ImMatchCpuIn1dAnd3d) {
  manual_seed(37);
  const std::vector<ConvNdCase> cases = {
      {{2, 3, 9}, {3}, {1}, {0}, {1}},
      {{1, 2, 11}, {4}, {2}, {3}, {2}},
      {{0, 2, 5}, {1}, {1}, {0}, {1}},
      {{1, 2, 4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}},
      {{2, 3, 3, 4, 4}, {3, 3, 3}, {2, 1, 2}, {1, 1, 1}, {1, 1, 1}},
      {{1, 1, 5, 3, 6}, {2, 1, 3}, {1, 1, 1}, {2, 0, 0}, {3, 1, 2}},
  };
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {  // Col2Im sums float16/bfloat16 in float
    for (const ConvNdCase& c : cases) {
      const detail::ConvGeometry g = geometry_of(c);
      const int64_t rows = c.input[1] * g.kernel_volume(), positions = g.positions();
      const std::string what = std::to_string(c.input.size() - 2) + "-d input " + std::to_string(c.input.back());
      for (bool transposed : {false, true}) {  // the last two dims swapped in memory
        IntList stored = c.input;
        std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
        Tensor in = transposed ? random(stored, d).transpose(-1, -2) : random(c.input, d);
        KernelCall unfold{OpKind::Im2Col, {TensorArg{}}, {arg(in)}};
        unfold.payload = std::make_shared<detail::ConvGeometry>(g);
        compare(unfold, empty({c.input[0], rows, positions}, d),
                what + (transposed ? " im2col transposed" : " im2col"));

        Tensor columns = transposed ? random({rows, c.input[0], positions}, d).transpose(0, 1)
                                    : random({c.input[0], rows, positions}, d);
        KernelCall fold{OpKind::Col2Im, {TensorArg{}}, {arg(columns)}};
        fold.payload = std::make_shared<detail::ConvGeometry>(g);
        compare(fold, empty(c.input, d), what + (transposed ? " col2im channel-major" : " col2im"));
      }
    }
  }
}

}  // namespace
}  // namespace ember::host_test
