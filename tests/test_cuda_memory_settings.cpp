// Allocator settings and cuBLAS workspaces through the public API, on emulated devices:
// PYTORCH_ALLOC_CONF over its deprecated alias, per_process_memory_fraction,
// set_allocator_settings at run time (Note [Allocator settings at run time] in
// memory/alloc_conf.h), and the per-(handle, stream) workspaces CUBLAS_WORKSPACE_CONFIG
// sizes (Note [cuBLAS workspaces] in memory/blas_workspace.h). The environment is read
// once per process, so it is set before main; each test leaves the settings as it found them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ember/ember.h"
#include "emulated_support.h"
#include "memory/alloc_conf.h"
#include "memory/blas_workspace.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;
constexpr size_t KiB = 1024;
constexpr const char* kEnvSettings = "max_split_size_mb:64,per_process_memory_fraction:0.5";

// Before any other cuda use in this process (static initialization runs before main).
const bool configured = (setenv("PYTORCH_ALLOC_CONF", kEnvSettings, 1),
                         setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:100", 1),  // the alias loses
                         setenv("CUBLAS_WORKSPACE_CONFIG", ":1024:2:16:8", 1),           // 2 MiB + 128 KiB
                         ember::cuda::emulate(3, 256 * MiB), true);

constexpr int64_t kWorkspace = static_cast<int64_t>(2 * MiB + 128 * KiB);

}  // namespace

namespace ember::testing {
namespace {

int64_t stat(int device, const std::string& key) { return cuda::memory_stats(device).at(key); }

TensorOptions on(int device) { return TensorOptions().device(Device(kCUDA, device)); }

// The bytes a fresh allocation of `bytes` holds on `device` (its rounded block size).
int64_t block_size_of(int device, int64_t bytes) {
  const int64_t before = stat(device, "allocated_bytes.all.current");
  Tensor t = empty({bytes}, on(device).dtype(kUInt8));
  return stat(device, "allocated_bytes.all.current") - before;
}

TEST(AllocatorSettings, PytorchAllocConfWinsOverItsDeprecatedAlias) {
  ASSERT_TRUE(configured);
  EXPECT_EQ(detail::env_alloc_config().max_split_size, 64 * MiB);
  EXPECT_EQ(detail::env_alloc_config().per_process_memory_fraction, 0.5);
  EXPECT_EQ(stat(0, "max_split_size"), static_cast<int64_t>(64 * MiB));  // every test leaves 64
  // PyTorch's precedence: PYTORCH_ALLOC_CONF whenever it is set, even empty.
  detail::AllocConfEnv env = detail::choose_alloc_conf_env("expandable_segments:True", "max_split_size_mb:100");
  EXPECT_EQ(env.value, "expandable_segments:True");
  EXPECT_FALSE(env.deprecated_alias);
  env = detail::choose_alloc_conf_env("", "max_split_size_mb:100");
  EXPECT_EQ(env.value, "");
  env = detail::choose_alloc_conf_env(nullptr, "max_split_size_mb:100");
  EXPECT_EQ(env.value, "max_split_size_mb:100");
  EXPECT_TRUE(env.deprecated_alias);
  EXPECT_FALSE(detail::choose_alloc_conf_env(nullptr, nullptr).value.has_value());
}

// per_process_memory_fraction:0.5 caps each device allocator at half of its 256 MiB.
TEST(AllocatorSettings, PerProcessMemoryFractionCapsADeviceAllocatorFromTheStart) {
  Tensor fits = empty({100 * static_cast<int64_t>(MiB)}, on(0).dtype(kUInt8));
  EXPECT_THROW(empty({100 * static_cast<int64_t>(MiB)}, on(0).dtype(kUInt8)), OutOfMemoryError);
  EXPECT_EQ(stat(0, "reserved_bytes.all.current"), static_cast<int64_t>(100 * MiB));
}

TEST(AllocatorSettings, RoundupAndMaxSplitSizeChangeAtRunTime) {
  const int64_t request = 5 * MiB + 1;
  EXPECT_EQ(block_size_of(1, request), static_cast<int64_t>(5 * MiB + 512));
  cuda::memory::set_allocator_settings("roundup_power2_divisions:4,max_split_size_mb:128");
  EXPECT_EQ(cuda::memory::get_allocator_settings(), "roundup_power2_divisions:4,max_split_size_mb:128");
  EXPECT_EQ(block_size_of(1, request), static_cast<int64_t>(6 * MiB));  // [4, 8) MiB in 1 MiB steps
  EXPECT_EQ(stat(1, "max_split_size"), static_cast<int64_t>(128 * MiB));
  // As PyTorch's parseArgs: the next settings start these keys from their defaults.
  cuda::memory::set_allocator_settings("max_split_size_mb:64");
  EXPECT_EQ(block_size_of(1, request), static_cast<int64_t>(5 * MiB + 512));
  EXPECT_EQ(stat(1, "max_split_size"), static_cast<int64_t>(64 * MiB));
  cuda::memory::set_allocator_settings(kEnvSettings);
}

// Large segments of `device`: {fixed ones, expandable ones}.
std::pair<int, int> large_segments_of(int device) {
  std::pair<int, int> kinds{0, 0};
  const nlohmann::json snapshot = nlohmann::json::parse(cuda::memory_snapshot_json());
  for (const auto& segment : snapshot["segments"])
    if (segment["device"] == device && segment["segment_type"] == "large")
      ++(segment["is_expandable"] ? kinds.second : kinds.first);
  return kinds;
}

// New segments take the setting; the existing one keeps its kind.
TEST(AllocatorSettings, ExpandableSegmentsChangeAtRunTimeForNewSegments) {
  cuda::empty_cache();
  Tensor before = empty({30 * static_cast<int64_t>(MiB)}, on(1).dtype(kUInt8));
  cuda::memory::set_allocator_settings("expandable_segments:True,max_split_size_mb:64");
  Tensor after = empty({30 * static_cast<int64_t>(MiB)}, on(1).dtype(kUInt8));
  EXPECT_EQ(large_segments_of(1), std::make_pair(1, 1));
  EXPECT_EQ(nlohmann::json::parse(cuda::memory_snapshot_json())["allocator_settings"]["expandable_segments"], true);
  cuda::memory::set_allocator_settings("expandable_segments:False," + std::string(kEnvSettings));
  Tensor last = empty({30 * static_cast<int64_t>(MiB)}, on(1).dtype(kUInt8));
  EXPECT_EQ(large_segments_of(1), std::make_pair(2, 1));
}

TEST(AllocatorSettings, PinnedHostRegisterChangesAtRunTime) {
  // Size classes no earlier run of this test (--gtest_repeat) left in the pinned cache.
  static int run = 0;
  const int64_t rows = int64_t{1024} << (2 * run++);
  const size_t registered = emulated().registered_host_bytes();
  cuda::memory::set_allocator_settings("pinned_use_cuda_host_register:True,pinned_num_register_threads:2," +
                                       std::string(kEnvSettings));
  Tensor pinned = ones({rows, 1024}).pin_memory();  // 4 MiB in the first run
  EXPECT_EQ(emulated().registered_host_bytes(), registered + static_cast<size_t>(rows) * 4 * KiB);
  cuda::memory::set_allocator_settings("pinned_use_cuda_host_register:False," + std::string(kEnvSettings));
  Tensor plain = ones({rows, 1024, 2}).pin_memory();
  EXPECT_EQ(emulated().registered_host_bytes(), registered + static_cast<size_t>(rows) * 4 * KiB);
}

std::string error_of(const std::string& settings) {
  try {
    cuda::memory::set_allocator_settings(settings);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for '" << settings << "'";
  return "";
}

// PyTorch's messages; nothing of a refused value is applied (PyTorch keeps the keys
// parsed before the bad one).
TEST(AllocatorSettings, BadSettingsAreRefusedWithTheSettingsIntact) {
  cuda::memory::set_allocator_settings(kEnvSettings);
  EXPECT_THAT(error_of("expandable_segments:True,foo:1"),
              ::testing::StartsWith("Unrecognized key 'foo' in CUDA allocator config."));
  EXPECT_THROW(cuda::memory::set_allocator_settings("roundup_power2_divisions:4,max_split_size_mb:5"), ValueError);
  EXPECT_THROW(cuda::memory::set_allocator_settings("per_process_memory_fraction:1.5"), ValueError);
  EXPECT_EQ(error_of("backend:cudaMallocAsync"),
            "Allocator backend parsed at runtime != allocator backend parsed at load time, cudaMallocAsync != native");
  EXPECT_EQ(cuda::memory::get_allocator_settings(), kEnvSettings);  // the last one that applied
  EXPECT_EQ(stat(1, "max_split_size"), static_cast<int64_t>(64 * MiB));
  EXPECT_EQ(block_size_of(1, 5 * MiB + 1), static_cast<int64_t>(5 * MiB + 512));  // no roundup
  EXPECT_EQ(nlohmann::json::parse(cuda::memory_snapshot_json())["allocator_settings"]["expandable_segments"], false);
  cuda::memory::set_allocator_settings("backend:native," + std::string(kEnvSettings));  // the same backend is fine
}

// ---- cuBLAS workspaces ---------------------------------------------------------------

TEST(CublasWorkspaces, ConfigParsesAsPyTorchsAndFallsBackWithAWarning) {
  EXPECT_EQ(detail::default_cublas_workspace_size(8, 0), 4096 * KiB * 2 + 16 * KiB * 8);
  EXPECT_EQ(detail::default_cublas_workspace_size(9, 0), 32 * MiB);
  EXPECT_EQ(detail::default_cublas_workspace_size(10, 0), 4096 * KiB * 2 + 16 * KiB * 8);
  EXPECT_EQ(detail::parse_cublas_workspace_config(":4096:2:16:8"), 4096 * KiB * 2 + 16 * KiB * 8);
  EXPECT_EQ(detail::parse_cublas_workspace_config(":4096:8"), 32 * MiB);
  EXPECT_EQ(detail::parse_cublas_workspace_config(":0:0"), 0u);
  EXPECT_EQ(detail::parse_cublas_workspace_config("x:16:1,:16:1"), 32 * KiB);  // text between pairs is skipped
  for (const char* bad : {"", "4096:8", ":4096", ":a:1", "::", ":99999999999999999999:1"})
    EXPECT_EQ(detail::parse_cublas_workspace_config(bad), std::nullopt) << bad;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(detail::chosen_cublas_workspace_size("4096:8", 123), 123u);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "UserWarning: Could not parse CUBLAS_WORKSPACE_CONFIG, using default workspace size of 123 bytes.\n");
  EXPECT_EQ(detail::chosen_cublas_workspace_size(nullptr, 123), 123u);
  EXPECT_EQ(detail::chosen_cublas_workspace_size(":1:3", 123), 3 * KiB);
  EXPECT_EQ(detail::cublas_workspace_size(2), static_cast<size_t>(kWorkspace));
}

// The first GEMM on a stream takes the configured workspace from the device's caching
// allocator, which keeps it; a second stream takes its own; clearing frees both.
TEST(CublasWorkspaces, EachStreamsFirstMatmulTakesOneUntilCleared) {
  const int device = 2;
  Tensor a = ones({16, 16}, on(device)), b = ones({16, 16}, on(device));
  cuda::synchronize(device);
  cuda::empty_cache();
  const int64_t allocated = stat(device, "allocated_bytes.all.current");
  const int64_t reserved = stat(device, "reserved_bytes.all.current");
  // Integer GEMMs do not run in cuBLAS; an empty one does not run at all.
  (void)matmul(a.to(kInt64), b.to(kInt64));
  (void)matmul(empty({0, 16}, on(device)), b);
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated);

  EXPECT_FLOAT_EQ(matmul(a, b).sum().item<float>(), 16.0f * 16 * 16);
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated + kWorkspace);
  (void)matmul(a, b);  // the same stream: the same workspace
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated + kWorkspace);

  cuda::Stream side(device);
  {
    cuda::StreamGuard guard(side);
    (void)matmul(a, b);
  }
  cuda::synchronize(device);
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated + 2 * kWorkspace);
  EXPECT_GT(stat(device, "reserved_bytes.all.current"), reserved);

  cuda::clear_cublas_workspaces();
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated);
  EXPECT_GT(stat(device, "reserved_bytes.all.current"), reserved);  // cached until empty_cache
  cuda::empty_cache();
  EXPECT_EQ(stat(device, "reserved_bytes.all.current"), reserved);

  (void)matmul(a, b);  // a new one after clearing
  EXPECT_EQ(stat(device, "allocated_bytes.all.current"), allocated + kWorkspace);
  cuda::clear_cublas_workspaces();
}

}  // namespace
}  // namespace ember::testing
