#include "runtime/build_info.h"

#include <cblas.h>
#include <fftw3.h>
#include <gloo/config.h>

#include <cstring>

namespace ember::detail {
namespace {

// Set by CMakeLists.txt for this file only, so a reconfigure recompiles nothing else.
#ifndef EMBER_VERSION_STRING
#error "EMBER_VERSION_STRING must be defined by the build"
#endif

std::string trimmed(const char* text) {
  std::string s = text == nullptr ? "" : text;
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

}  // namespace

std::string ember_version() { return EMBER_VERSION_STRING; }

std::vector<BuildSetting> build_options() {
  return {
      {"build type", EMBER_BUILD_TYPE_STRING},
      {"CUDA driver backend", EMBER_CUDA_BACKEND_STRING},
      {"sanitizers", EMBER_SANITIZE_STRING},
      {"compiler", EMBER_COMPILER_STRING},
  };
}

std::vector<LibraryVersion> library_versions() {
  std::vector<LibraryVersion> versions = cuda_library_versions();
  // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  versions.push_back({"OpenBLAS", trimmed(openblas_get_config())});
  versions.push_back({"FFTW", trimmed(fftw_version)});  // "fftw-3.3.10-sse2-avx"
  versions.push_back({"Gloo", std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                                  std::to_string(GLOO_VERSION_PATCH)});
  return versions;
}

}  // namespace ember::detail
