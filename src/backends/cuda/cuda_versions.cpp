// The CUDA libraries' versions for build_info: asked of the loaded libraries, which
// answer without a GPU (the driver's version is 0 where no driver is installed).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>
#include <nccl.h>

#include <string>

#include "backends/cuda/cuda_blas_library.h"
#include "runtime/build_info.h"

namespace ember::detail {
namespace {

// CUDA encodes versions as 1000 * major + 10 * minor (12040 -> "12.4").
std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "major.minor.patch" from a library's GetProperty function; nullopt when it fails.
template <typename GetProperty>
std::optional<std::string> library_version(GetProperty get) {
  int major = 0, minor = 0, patch = 0;
  if (!get(MAJOR_VERSION, &major) || !get(MINOR_VERSION, &minor) || !get(PATCH_LEVEL, &patch)) return std::nullopt;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

std::vector<LibraryVersion> cuda_library_versions() {
  std::vector<LibraryVersion> versions;
  int runtime = 0, driver = 0;
  versions.push_back({"CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess
                                          ? std::optional(cuda_version_string(runtime))
                                          : std::nullopt});
  versions.push_back({"CUDA driver", cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                                         ? std::optional(cuda_version_string(driver))
                                         : std::nullopt});
  // cuBLAS is opened here if no matmul has opened it (Note [cuBLAS opened on first use]).
  const driver::BlasLibrary* blas = driver::blas_library_if_available();
  versions.push_back(
      {"cuBLAS", blas == nullptr ? std::nullopt : library_version([blas](libraryPropertyType type, int* value) {
         return blas->get_property(type, value) == CUBLAS_STATUS_SUCCESS;
       })});
  versions.push_back({"cuFFT", library_version([](libraryPropertyType type, int* value) {
                        return cufftGetProperty(type, value) == CUFFT_SUCCESS;
                      })});
  int nccl = 0;  // NCCL_VERSION_CODE form: 22805 is 2.28.5
  versions.push_back({"NCCL", ncclGetVersion(&nccl) == ncclSuccess
                                  ? std::optional(std::to_string(nccl / 10000) + "." +
                                                  std::to_string(nccl / 100 % 100) + "." + std::to_string(nccl % 100))
                                  : std::nullopt});
  return versions;
}

}  // namespace ember::detail
