// Built without the CUDA driver backend: ember uses none of the CUDA libraries.
#include "runtime/build_info.h"

namespace ember::detail {

std::vector<LibraryVersion> cuda_library_versions() {
  return {{"CUDA runtime", std::nullopt},
          {"CUDA driver", std::nullopt},
          {"cuBLAS", std::nullopt},
          {"cuFFT", std::nullopt}};
}

}  // namespace ember::detail
