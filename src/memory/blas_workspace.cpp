// cuBLAS workspaces (Note [cuBLAS workspaces] in blas_workspace.h).
#include "memory/blas_workspace.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ember/cuda_allocator.h"
#include "memory/memory.h"
#include "runtime/backend.h"

namespace ember::detail {
namespace {

constexpr size_t kKiB = 1024;

struct Key {
  int device;
  const void* handle;
  const void* stream;
  auto operator<=>(const Key&) const = default;
};

struct Workspaces {
  std::shared_mutex mutex;
  std::map<Key, BlasWorkspace> map;
};

Workspaces& workspaces() {
  static auto* instance = new Workspaces;  // leaked: GEMMs may run during static destruction
  return *instance;
}

// Every GEMM asks for its workspace, mostly on the stream the thread used last: a
// one-entry cache per thread answers that without the map's lock. Clearing bumps the
// generation, which empties every thread's entry.
std::atomic<uint64_t> generation{1};
struct LastUsed {
  Key key{};
  uint64_t generation = 0;
  BlasWorkspace workspace;
};
thread_local LastUsed last_used;

// Digits at `pos`, consumed; nullopt when there are none or they overflow.
std::optional<size_t> digits_at(std::string_view text, size_t& pos) {
  const size_t start = pos;
  size_t value = 0;
  for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
    const auto digit = static_cast<size_t>(text[pos] - '0');
    if (value > (std::numeric_limits<size_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (pos == start) return std::nullopt;
  return value;
}

}  // namespace

size_t default_cublas_workspace_size(int major, int minor) noexcept {
  if (major == 9 && minor == 0) return 4096 * kKiB * 8;
  return 4096 * kKiB * 2 + 16 * kKiB * 8;
}

std::optional<size_t> parse_cublas_workspace_config(std::string_view config) {
  // PyTorch's regex ":([0-9]+):([0-9]+)", searched for repeatedly: each match starts
  // where the last one ended, text between matches is skipped.
  size_t total = 0;
  bool matched = false;
  for (size_t start = 0; start < config.size(); ++start) {
    if (config[start] != ':') continue;
    size_t pos = start + 1;
    std::optional<size_t> size = digits_at(config, pos);
    if (!size || pos >= config.size() || config[pos] != ':') continue;
    ++pos;
    std::optional<size_t> count = digits_at(config, pos);
    if (!count) continue;
    if (*count != 0 && *size > std::numeric_limits<size_t>::max() / kKiB / *count) return std::nullopt;
    const size_t bytes = *size * kKiB * *count;
    if (bytes > std::numeric_limits<size_t>::max() - total) return std::nullopt;
    total += bytes;
    matched = true;
    start = pos - 1;  // the next search starts after this match
  }
  if (!matched) return std::nullopt;
  return total;
}

size_t chosen_cublas_workspace_size(const char* config, size_t default_size) {
  if (config == nullptr) return default_size;
  if (std::optional<size_t> size = parse_cublas_workspace_config(config)) return *size;
  std::cerr << "UserWarning: Could not parse CUBLAS_WORKSPACE_CONFIG, using default workspace size of " << default_size
            << " bytes.\n";
  return default_size;
}

size_t cublas_workspace_size(int device) {
  static const std::optional<std::string> config = [] {
    const char* value = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    return value ? std::optional<std::string>(value) : std::nullopt;
  }();
  const cuda::DeviceProperties props = undecorated_backend().properties(device);
  return chosen_cublas_workspace_size(config ? config->c_str() : nullptr,
                                      default_cublas_workspace_size(props.major, props.minor));
}

BlasWorkspace blas_workspace(int device, const void* handle, const void* stream) {
  const Key key{device, handle, stream};
  const uint64_t current = generation.load(std::memory_order_acquire);
  if (last_used.generation == current && last_used.key == key) [[likely]]
    return last_used.workspace;
  Workspaces& all = workspaces();
  {
    std::shared_lock lock(all.mutex);
    if (auto it = all.map.find(key); it != all.map.end()) {
      last_used = {key, current, it->second};
      return it->second;
    }
  }
  // First GEMM of the pair: allocate outside the lock (the allocator may synchronize).
  BlasWorkspace made;
  made.size = cublas_workspace_size(device);
  Allocator& allocator = cuda_allocator(device);
  made.ptr = made.size > 0 ? allocator.allocate(made.size) : nullptr;
  std::unique_lock lock(all.mutex);
  auto [it, inserted] = all.map.try_emplace(key, made);
  if (!inserted && made.ptr != nullptr) allocator.deallocate(made.ptr);  // another thread's came first
  last_used = {key, current, it->second};
  return it->second;
}

void clear_blas_workspaces(int device) noexcept {
  Workspaces& all = workspaces();
  std::map<Key, BlasWorkspace> taken;
  {
    std::unique_lock lock(all.mutex);
    for (auto it = all.map.begin(); it != all.map.end();) {
      if (device != -1 && it->first.device != device) {
        ++it;
        continue;
      }
      taken.insert(all.map.extract(it++));
    }
    generation.fetch_add(1, std::memory_order_acq_rel);
  }
  for (const auto& [key, workspace] : taken)
    if (workspace.ptr != nullptr) cuda_allocator(key.device).deallocate(workspace.ptr);
}

}  // namespace ember::detail

namespace ember::cuda {

void clear_cublas_workspaces() { detail::clear_blas_workspaces(); }

}  // namespace ember::cuda
