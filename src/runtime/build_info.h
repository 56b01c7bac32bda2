// What this build of ember is: its version, the options it was configured with and the
// versions of the libraries it runs on (torch.__config__.show(), torch.version.cuda).
// Read by ember-info; nothing here selects a backend or touches a device.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ember::detail {

/// One name/value line of the build description.
struct BuildSetting {
  std::string name;
  std::string value;
};

/// ember's version, "major.minor.patch".
std::string ember_version();

/// How the library was configured: build type, CUDA driver backend, sanitizers, compiler.
std::vector<BuildSetting> build_options();

/// A library ember calls into, and its version; nullopt when this build does not use it.
struct LibraryVersion {
  std::string name;
  std::optional<std::string> version;
};

/// CUDA runtime, cuBLAS, cuFFT, NCCL, OpenBLAS, FFTW, Gloo, in that order. Versions are
/// asked of the loaded library where it can tell (OpenBLAS, FFTW, CUDA), else taken from
/// its headers at build time.
std::vector<LibraryVersion> library_versions();

/// The CUDA libraries' entries of library_versions(), from the driver backend's build
/// (src/backends/cuda) or, without it, with no version.
std::vector<LibraryVersion> cuda_library_versions();

}  // namespace ember::detail
