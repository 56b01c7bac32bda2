// Matmul on the driver backend through cuBLAS (floating and complex dtypes; integers
// go to a simple kernel, cuda_matmul_int.cu).
//
// cuBLAS is column-major: a row-major C = A @ B is computed as the column-major
// C^T = B^T A^T, which needs no data movement when each operand is row- or
// column-major in memory (a transpose flag covers the latter). Any other strides, and
// an output that is not row-major, go through a contiguous temporary (a Workspace, Note
// [Driver temporaries]). Batches use cublasGemmStridedBatchedEx with the operands' batch strides
// (0 for a broadcast operand). float32 honours kargs::Matmul::allow_tf32 through the compute
// type (CUBLAS_COMPUTE_32F_FAST_TF32 vs CUBLAS_COMPUTE_32F); float16 and bfloat16 honour
// the launch's math bits (Note [Matmul math] in kernels/matmul_math.h): float16
// accumulation through CUBLAS_COMPUTE_16F (alpha and beta then float16), and a disallowed
// reduced-precision reduction through the handle's math mode
// (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), which is set on every launch because a
// thread's handle serves every dtype.
//
// One cuBLAS handle per device and thread (handles are not thread-safe to share),
// bound to the launch stream and to that pair's workspace (Note [cuBLAS workspaces] in
// memory/blas_workspace.h) on every call; Note [Driver reset generations] retires
// handles that a cudaDeviceReset destroyed.
#include <cuComplex.h>
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <deque>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_blas_library.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/cuda_workspace.h"
#include "ember/errors.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/matmul_math.h"
#include "memory/blas_workspace.h"

namespace ember::detail::driver {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<uint64_t> blas_generations[kMaxDevices];

class BlasHandles {
 public:
  ~BlasHandles() {
    for (auto& entry : entries_) {
      if (entry.handle != nullptr) (void)blas_library().destroy(entry.handle);  // opened: it made the handle
    }
  }
  cublasHandle_t get(int device) {
    EMBER_ASSERT(device >= 0 && device < kMaxDevices);
    if (entries_.size() <= static_cast<size_t>(device)) entries_.resize(device + 1);
    Entry& entry = entries_[device];
    uint64_t generation = blas_generations[device].load();
    if (entry.handle != nullptr && entry.generation != generation) entry.handle = nullptr;  // died with the reset
    if (entry.handle == nullptr) {
      // cublasCreate allocates its workspace: the first matmul of a thread may be inside a capture.
      RelaxedCaptureScope relaxed;
      check_cublas(blas_library().create(&entry.handle), "cublasCreate(&handle)");
      entry.generation = generation;
    }
    return entry.handle;
  }

 private:
  struct Entry {
    cublasHandle_t handle = nullptr;
    uint64_t generation = 0;
  };
  std::vector<Entry> entries_;
};

cublasHandle_t blas_handle(int device) {
  thread_local BlasHandles handles;
  return handles.get(device);
}

/// How cuBLAS sees the transpose of a row-major rows x cols matrix with element strides
/// (row_stride, col_stride): op N over it as column-major, or op T over the matrix
/// itself as column-major; nullopt when neither fits.
struct Layout {
  cublasOperation_t op;
  int64_t ld;
};
std::optional<Layout> gemm_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (cols == 1 || col_stride == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(1, cols) : row_stride;
    if (ld >= std::max<int64_t>(1, cols)) return Layout{CUBLAS_OP_N, ld};
  }
  if (rows == 1 || row_stride == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(1, rows) : col_stride;
    if (ld >= std::max<int64_t>(1, rows)) return Layout{CUBLAS_OP_T, ld};
  }
  return std::nullopt;
}

struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  // alpha = 1, beta = 0 in the scalar type of the compute type.
  const void* one;
  const void* zero;
};

BlasTypes blas_types(DType dtype, bool allow_tf32, int64_t math) {
  static const uint16_t h_one = 0x3c00, h_zero = 0;  // float16 1 and 0, CUBLAS_COMPUTE_16F's scalar type
  static const float f_one = 1, f_zero = 0;
  static const double d_one = 1, d_zero = 0;
  static const cuComplex c_one{1, 0}, c_zero{0, 0};
  static const cuDoubleComplex z_one{1, 0}, z_zero{0, 0};
  switch (dtype) {
    case DType::Float32:
      return {CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, &f_one, &f_zero};
    case DType::Float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, &d_one, &d_zero};
    case DType::Float16:
      if (math & kMatmulHalfAccumulation) return {CUDA_R_16F, CUBLAS_COMPUTE_16F, &h_one, &h_zero};
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, &f_one, &f_zero};
    case DType::BFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, &f_one, &f_zero};
    case DType::Complex64: return {CUDA_C_32F, CUBLAS_COMPUTE_32F, &c_one, &c_zero};
    case DType::Complex128: return {CUDA_C_64F, CUBLAS_COMPUTE_64F, &z_one, &z_zero};
    default: break;
  }
  fail<TypeError>("\"addmm_cuda\" not implemented for '", scalar_type_name(dtype), "'");
}

/// A contiguous (batch, rows, cols) temporary shaped like `like`, kept in `temporaries`.
TensorArg make_temporary(const TensorArg& like, int device, std::deque<Workspace>& temporaries) {
  TensorArg temp;
  temp.dtype = like.dtype;
  temp.sizes = like.sizes;
  temp.strides = {like.sizes[1] * like.sizes[2], like.sizes[2], 1};
  size_t bytes = static_cast<size_t>(like.numel()) * itemsize(like.dtype);
  temp.data = temporaries.emplace_back(device, std::max<size_t>(bytes, 1)).get();
  return temp;
}

void copy_into(const TensorArg& dst, const TensorArg& src, cudaStream_t stream) {
  KernelCall copy{};
  copy.op = OpKind::Copy;
  copy.outputs = {dst};
  copy.inputs = {src};
  launch_copy(copy, stream);
}

int checked_int(int64_t value, const char* what) {
  EMBER_CHECK(value <= INT_MAX, ValueError, "matmul: ", what, " = ", value, " is too large for cuBLAS (at most ",
              INT_MAX, ")");
  return static_cast<int>(value);
}

}  // namespace

void bump_blas_generation(int device) {
  if (device >= 0 && device < kMaxDevices) blas_generations[device].fetch_add(1);
}

void launch_matmul(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& out = call.outputs.at(0);
  DType dtype = out.dtype;
  if (dtype == kUInt8 || dtype == kInt8 || dtype == kInt16 || dtype == kInt32 || dtype == kInt64) {
    return launch_integer_matmul(call, stream);
  }
  const int64_t math = matmul_math(call);
  BlasTypes types = blas_types(dtype, call.arg<kargs::Matmul>().allow_tf32, math);
  EMBER_ASSERT(out.sizes.size() == 3 && call.inputs.at(0).sizes.size() == 3 && call.inputs.at(1).sizes.size() == 3);
  int64_t batch = out.sizes[0], m = out.sizes[1], n = out.sizes[2], k = call.inputs[0].sizes[2];
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: zeros, which cuBLAS does not promise for k == 0
    KernelCall fill{};
    fill.op = OpKind::Fill;
    fill.outputs = {out};
    fill.args = kargs::Value{0};
    return launch_fill(fill, stream);
  }

  int device = 0;
  check_cuda(cudaGetDevice(&device));  // the launch's, made current by DriverBackend::launch
  std::deque<Workspace> temporaries;   // returned after the last use is enqueued
  auto operand = [&](const TensorArg& arg) {
    auto layout = gemm_layout(arg.sizes[1], arg.sizes[2], arg.strides[1], arg.strides[2]);
    if (layout) return std::pair{arg, *layout};
    TensorArg temp = make_temporary(arg, device, temporaries);
    copy_into(temp, arg, stream);
    return std::pair{temp, *gemm_layout(arg.sizes[1], arg.sizes[2], temp.strides[1], temp.strides[2])};
  };
  auto [a, a_layout] = operand(call.inputs[0]);
  auto [b, b_layout] = operand(call.inputs[1]);
  TensorArg c = out;
  auto c_layout = gemm_layout(m, n, out.strides[1], out.strides[2]);
  bool c_direct = c_layout && c_layout->op == CUBLAS_OP_N && (batch == 1 || out.strides[0] != 0);
  if (!c_direct) {
    c = make_temporary(out, device, temporaries);
    c_layout = gemm_layout(m, n, c.strides[1], c.strides[2]);
  }

  cublasHandle_t handle = blas_handle(device);
  const BlasLibrary& blas = blas_library();
  check_cublas(blas.set_stream(handle, stream), "cublasSetStream(handle, stream)");
  // The pair's workspace from the caching allocator (Note [cuBLAS workspaces]), set on
  // every call as PyTorch does.
  const BlasWorkspace workspace = blas_workspace(device, handle, stream);
  check_cublas(blas.set_workspace(handle, workspace.ptr, workspace.size),
               "cublasSetWorkspace(handle, workspace, size)");
  const bool reduced_types = dtype == kFloat16 || dtype == kBFloat16;
  const bool disallow_reduction = reduced_types && (math & kMatmulReducedReduction) == 0;
  check_cublas(blas.set_math_mode(
                   handle, disallow_reduction ? CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode(handle, mode)");
  // An operand with batch size 1 is broadcast over the batch (stride 0).
  auto batch_stride = [&](const TensorArg& arg) { return batch == 1 || arg.sizes[0] == 1 ? 0 : arg.strides[0]; };
  check_cublas(
      blas.gemm_strided_batched_ex(handle, b_layout.op, a_layout.op, checked_int(n, "n"), checked_int(m, "m"),
                                   checked_int(k, "k"), types.one, b.data, types.data, checked_int(b_layout.ld, "ldb"),
                                   batch_stride(b), a.data, types.data, checked_int(a_layout.ld, "lda"),
                                   batch_stride(a), types.zero, c.data, types.data, checked_int(c_layout->ld, "ldc"),
                                   batch_stride(c), checked_int(batch, "batch"), types.compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx(...)");
  if (!c_direct) copy_into(out, c, stream);
  check_launch(stream);
}

}  // namespace ember::detail::driver
