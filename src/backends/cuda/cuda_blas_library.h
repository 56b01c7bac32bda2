// cuBLAS for the driver backend, opened on first use (Note [cuBLAS opened on first use]).
#pragma once

#include <cublas_v2.h>

namespace ember::detail::driver {

// Note [cuBLAS opened on first use]
// libember does not link libcublas. Loading it (and libcublasLt, which it needs) runs
// initialisers that take ~0.4 s and leave ~210 MB resident on a 2-core x86-64 machine, in
// every process that links it, including programs that only use the cpu or emulated
// devices and each of the test suite's ~1,400 processes. The driver backend opens it with
// dlopen the first time it needs it (the first matmul on an NVIDIA GPU, or ember-info's
// version list). The loader searches as for a linked library: libember's RUNPATH (the
// CUDA toolkit's library folder it was built against), LD_LIBRARY_PATH, then the system's
// paths. cuFFT, NCCL and the CUDA runtime stay linked: they cost ~0.02 s together.

/// The cuBLAS entry points ember calls, resolved in the opened library.
struct BlasLibrary {
  // The exported function (C++ also sees an inline overload taking a cudaDataType).
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&::cublasSetMathMode) set_math_mode = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
  decltype(&::cublasGetProperty) get_property = nullptr;
};

/// The library, opened on the first call (thread-safe). Throws CudaError naming the
/// library and the loader's reason when it cannot be opened or lacks an entry point; a
/// later call tries again.
const BlasLibrary& blas_library();

/// The library when it is open or can be opened now; nullptr otherwise (no exception).
const BlasLibrary* blas_library_if_available() noexcept;

/// True once the library has been opened by this process.
bool blas_library_opened() noexcept;

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call);

/// Throws CudaError "CUDA error: <cublasGetStatusString> when calling `<call>`" unless
/// `status` is CUBLAS_STATUS_SUCCESS (PyTorch's wording).
inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    throw_cublas_error(status, call);
}

}  // namespace ember::detail::driver
