// cuBLAS workspaces: one per (cuBLAS handle, stream), taken from the device's allocator.
//
// Note [cuBLAS workspaces]
// As PyTorch's (ATen/cuda/CublasHandlePool.cpp): the first GEMM that a (handle, stream)
// pair runs allocates a workspace of CUBLAS_WORKSPACE_CONFIG's size from the device's
// allocator, on that stream, and the pair keeps it for its later GEMMs. So the workspaces
// show in memory_stats() and snapshots, and one first made during a graph capture comes
// from the graph's private pool. clear_cublas_workspaces() frees them all to the
// allocator, which keeps them cached until empty_cache(). The driver hands the buffer to
// cublasSetWorkspace; emulated devices run no cuBLAS but take the same workspace at the
// first GEMM launched on a (device, stream) (handle: none), so their memory figures
// match a GPU's.
//
// CUBLAS_WORKSPACE_CONFIG is read once per process: every ":SIZE:COUNT" in it adds
// SIZE KiB * COUNT. A value with none warns (at each new workspace) and uses the default,
// as PyTorch's: 32 MiB
// (:4096:8) on compute capability 9.0, :4096:2:16:8 (8 MiB + 128 KiB) elsewhere.
// ":0:0" gives no workspace.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ember::detail {

/// PyTorch's default workspace size for a device of compute capability major.minor.
size_t default_cublas_workspace_size(int major, int minor) noexcept;

/// The total of the ":SIZE:COUNT" pairs in `config`; nullopt when it has none (or a
/// total that overflows).
std::optional<size_t> parse_cublas_workspace_config(std::string_view config);

/// The size CUBLAS_WORKSPACE_CONFIG's value `config` chooses: `default_size` when it is
/// unset (nullptr) or, with PyTorch's warning on stderr, has no ":SIZE:COUNT".
size_t chosen_cublas_workspace_size(const char* config, size_t default_size);

/// The workspace size for `device`: chosen_cublas_workspace_size of the environment's
/// value (read once) and the default for the device's compute capability.
size_t cublas_workspace_size(int device);

struct BlasWorkspace {
  void* ptr = nullptr;  // nullptr when the size is 0
  size_t size = 0;
};

/// The workspace of (`handle`, `stream`) on `device`, allocated on first use from the
/// device's allocator, which must be on `stream` (the calling thread's current stream of
/// `device`). Throws what the allocator throws (OutOfMemoryError); nothing is kept then.
BlasWorkspace blas_workspace(int device, const void* handle, const void* stream);

/// Frees the workspaces of `device` (-1: of every device) into its allocator
/// (ember::cuda::clear_cublas_workspaces; a device reset).
void clear_blas_workspaces(int device = -1) noexcept;

}  // namespace ember::detail
