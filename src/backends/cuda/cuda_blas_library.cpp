// cuBLAS opened on first use (Note [cuBLAS opened on first use] in cuda_blas_library.h).
#include "backends/cuda/cuda_blas_library.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "ember/errors.h"

namespace ember::detail::driver {
namespace {

// The soname of the cuBLAS major version ember was compiled against (libcublas.so.13).
std::string blas_soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

std::mutex open_mutex;
BlasLibrary library;
std::atomic<bool> opened{false};

template <typename F>
void resolve(void* handle, F& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (slot == nullptr) missing += missing.empty() ? name : std::string(", ") + name;
}

// Opens the library under open_mutex; an empty string on success, else the reason.
std::string open_locked() {
  if (opened.load(std::memory_order_acquire)) return {};
  std::string soname = blas_soname();
  // RTLD_LOCAL: cuBLAS's symbols stay out of the global namespace, as a linked
  // library's would not matter to anyone either. Never closed: cuBLAS handles live in
  // thread-local caches until their threads exit.
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return soname + " could not be opened (" + (why ? why : "unknown reason") + ")";
  }
  BlasLibrary resolved;
  std::string missing;
  resolve(handle, resolved.create, "cublasCreate_v2", missing);
  resolve(handle, resolved.destroy, "cublasDestroy_v2", missing);
  resolve(handle, resolved.set_stream, "cublasSetStream_v2", missing);
  resolve(handle, resolved.set_workspace, "cublasSetWorkspace_v2", missing);
  resolve(handle, resolved.set_math_mode, "cublasSetMathMode", missing);
  resolve(handle, resolved.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx", missing);
  resolve(handle, resolved.status_string, "cublasGetStatusString", missing);
  resolve(handle, resolved.get_property, "cublasGetProperty", missing);
  if (!missing.empty()) {
    (void)dlclose(handle);
    return soname + " lacks " + missing;
  }
  library = resolved;
  opened.store(true, std::memory_order_release);
  return {};
}

}  // namespace

const BlasLibrary& blas_library() {
  if (opened.load(std::memory_order_acquire)) [[likely]]
    return library;
  std::lock_guard lock(open_mutex);
  std::string why = open_locked();
  EMBER_CHECK(why.empty(), CudaError, "CUDA error: cuBLAS is needed but ", why);
  return library;
}

const BlasLibrary* blas_library_if_available() noexcept {
  if (opened.load(std::memory_order_acquire)) return &library;
  try {
    std::lock_guard lock(open_mutex);
    return open_locked().empty() ? &library : nullptr;
  } catch (...) {
    return nullptr;
  }
}

bool blas_library_opened() noexcept { return opened.load(std::memory_order_acquire); }

void throw_cublas_error(cublasStatus_t status, const char* call) {
  // A status came from cuBLAS, so the library is open.
  const char* text = blas_library_opened() ? library.status_string(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
  fail<CudaError>("CUDA error: ", text, " when calling `", call, "`");
}

}  // namespace ember::detail::driver
