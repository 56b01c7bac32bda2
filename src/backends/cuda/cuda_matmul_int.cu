// Integer matmul on the driver backend (cuBLAS has no general integer GEMM): one
// thread per output element, any strides, accumulating in the element type with
// wrap-around as PyTorch's integer matmul does. Speed is not the point; exactness is.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

struct MatmulGeometry {
  int64_t batch, m, n, k;
  int64_t out[3], a[3], b[3];  // element strides (batch, row, col)
};

template <typename T>
__global__ void integer_matmul_kernel(T* out, const T* a, const T* b, MatmulGeometry g) {
  using U = std::make_unsigned_t<T>;  // unsigned arithmetic wraps without UB
  int64_t total = g.batch * g.m * g.n;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t col = i % g.n, row = (i / g.n) % g.m, batch = i / (g.n * g.m);
    const T* a_row = a + batch * g.a[0] + row * g.a[1];
    const T* b_col = b + batch * g.b[0] + col * g.b[2];
    U acc = 0;
    for (int64_t j = 0; j < g.k; ++j) {
      acc = static_cast<U>(acc + static_cast<U>(a_row[j * g.a[2]]) * static_cast<U>(b_col[j * g.b[1]]));
    }
    out[batch * g.out[0] + row * g.out[1] + col * g.out[2]] = static_cast<T>(acc);
  }
}

}  // namespace

void launch_integer_matmul(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& out = call.outputs.at(0);
  const TensorArg& a = call.inputs.at(0);
  const TensorArg& b = call.inputs.at(1);
  MatmulGeometry g{out.sizes[0], out.sizes[1], out.sizes[2], a.sizes[2], {}, {}, {}};
  for (int d = 0; d < 3; ++d) {
    g.out[d] = out.strides[d];
    g.a[d] = a.strides[d];
    g.b[d] = b.strides[d];
  }
  if (a.sizes[0] == 1) g.a[0] = 0;  // broadcast over the batch
  if (b.sizes[0] == 1) g.b[0] = 0;
  int64_t total = g.batch * g.m * g.n;
  if (total == 0) return;
  dispatch_if<IntegerType>(out.dtype, "addmm_cuda", [&](auto tag) {
    using T = typename decltype(tag)::type;
    integer_matmul_kernel<T><<<grid_blocks(total), kThreads, 0, stream>>>(
        static_cast<T*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data), g);
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
