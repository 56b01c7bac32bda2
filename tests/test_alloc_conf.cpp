// PYTORCH_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF) parsing: every option, both roundup forms, parsing over
// the settings in force, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "ember/errors.h"
#include "memory/alloc_conf.h"

namespace ember::detail {
namespace {

constexpr size_t MiB = size_t{1} << 20;

std::string error_of(std::string_view conf) {
  try {
    parse_alloc_conf(conf);
  } catch (const ValueError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ValueError for '" << conf << "'";
  return "";
}

TEST(AllocConf, EmptyMeansDefaults) {
  for (const char* conf : {"", "  "}) {
    AllocatorConfig config = parse_alloc_conf(conf);
    EXPECT_EQ(config.max_split_size, std::numeric_limits<size_t>::max());
    EXPECT_EQ(config.garbage_collection_threshold, 0.0);
    EXPECT_FALSE(config.expandable_segments);
    EXPECT_TRUE(config.caching_enabled);
    EXPECT_EQ(config.divisions_for(5 * MiB), 0u);
    EXPECT_EQ(config.max_non_split_rounding_size, 20 * MiB);
    EXPECT_FALSE(config.release_lock_on_malloc);
  }
}

// Issue 34 item 17: the keys PyTorch 2.x added made every allocation fail ("Unrecognized
// key"). Their effect on the allocator is tested in test_alloc_conf_effects.cpp.
TEST(AllocConf, PyTorch2Keys) {
  AllocatorConfig config = parse_alloc_conf("max_non_split_rounding_mb:100,release_lock_on_cudamalloc:True");
  EXPECT_EQ(config.max_non_split_rounding_size, 100 * MiB);
  EXPECT_TRUE(config.release_lock_on_malloc);
  EXPECT_FALSE(parse_alloc_conf("release_lock_on_cudamalloc:False").release_lock_on_malloc);
  // ROCm's spellings, which PyTorch's CUDA build accepts too.
  EXPECT_TRUE(parse_alloc_conf("release_lock_on_hipmalloc:True").release_lock_on_malloc);
  EXPECT_TRUE(parse_alloc_conf("pinned_use_hip_host_register:True").pinned_use_host_register);
  EXPECT_EQ(error_of("max_non_split_rounding_mb:19"),
            "CachingAllocator option max_non_split_rounding_mb too small, must be >= 20, but got 19");
  EXPECT_EQ(error_of("max_non_split_rounding_mb:x"),
            "Expected a non-negative integer for max_non_split_rounding_mb in the CUDA allocator config, but got 'x'");
  EXPECT_EQ(error_of("release_lock_on_cudamalloc:1"),
            "Expected a single True/False argument for release_lock_on_cudamalloc, but got '1'");
}

// PyTorch 2.x's tokenizer: one comma may end the value; a ',' where a key should be is an
// unknown key.
TEST(AllocConf, EmptyOptionsAreRefusedButOneTrailingCommaIsNot) {
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:64,").max_split_size, 64 * MiB);
  for (const char* conf : {",", ",,", ",max_split_size_mb:64", "max_split_size_mb:64,,",
                           "max_split_size_mb:64,,backend:native", "max_split_size_mb:64, ,backend:native"}) {
    EXPECT_THAT(error_of(conf),
                ::testing::StartsWith("Unrecognized key ',' in CUDA allocator config. (An empty option"))
        << conf;
  }
}

// Booleans are "True" or "False" only, as PyTorch 2.x's.
TEST(AllocConf, BooleansArePyTorchsTwoSpellings) {
  for (const char* value : {"true", "1", "false", "0", "TRUE", ""}) {
    EXPECT_EQ(error_of(std::string("expandable_segments:") + value),
              std::string("Expected a single True/False argument for expandable_segments, but got '") + value + "'");
  }
  EXPECT_TRUE(parse_alloc_conf("expandable_segments:True").expandable_segments);
  EXPECT_FALSE(parse_alloc_conf("expandable_segments:False").expandable_segments);
}

TEST(AllocConf, AllOptionsTogether) {
  AllocatorConfig config = parse_alloc_conf(
      "max_split_size_mb:128, garbage_collection_threshold:0.6,expandable_segments:True,roundup_power2_divisions:8");
  EXPECT_EQ(config.max_split_size, 128 * MiB);
  EXPECT_DOUBLE_EQ(config.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(config.expandable_segments);
  EXPECT_EQ(config.divisions_for(1), 8u);
  EXPECT_EQ(config.divisions_for(size_t{1} << 40), 8u);
}

TEST(AllocConf, RoundupListAssignsIntervals) {
  // Keys are MiB sizes: entries before the first key take its value, ">" fills the rest.
  AllocatorConfig config = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  EXPECT_EQ(config.divisions_for(1 * MiB), 1u);
  EXPECT_EQ(config.divisions_for(300 * MiB), 1u);  // [256, 512) MiB
  EXPECT_EQ(config.divisions_for(600 * MiB), 2u);
  EXPECT_EQ(config.divisions_for(1100 * MiB), 4u);
  EXPECT_EQ(config.divisions_for(3000 * MiB), 8u);
  EXPECT_EQ(config.divisions_for(size_t{1} << 40), 8u);
}

TEST(AllocConf, UnknownKeyIsAValueError) {
  // PyTorch's message, then the keys ember knows.
  EXPECT_EQ(error_of("max_split_size:100"),
            "Unrecognized key 'max_split_size' in CUDA allocator config. (Expected max_split_size_mb, "
            "max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, expandable_segments, "
            "release_lock_on_cudamalloc, backend, pinned_use_cuda_host_register, pinned_num_register_threads, "
            "pinned_use_background_threads or per_process_memory_fraction)");
  EXPECT_THAT(error_of("max_split_size_mb:100,foo:1"), ::testing::StartsWith("Unrecognized key 'foo'"));
}

TEST(AllocConf, BadValuesAreValueErrors) {
  EXPECT_EQ(error_of("max_split_size_mb:19"),
            "CachingAllocator option max_split_size_mb too small, must be >= 20, but got 19");
  // PyTorch 2.8 takes the 20 MiB large segment itself.
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:20").max_split_size, 20 * MiB);
  EXPECT_EQ(error_of("max_split_size_mb:abc"),
            "Expected a non-negative integer for max_split_size_mb in the CUDA allocator config, but got 'abc'");
  EXPECT_EQ(error_of("max_split_size_mb:-5"),
            "Expected a non-negative integer for max_split_size_mb in the CUDA allocator config, but got '-5'");
  EXPECT_THAT(error_of("max_split_size_mb:99999999999999999999999"), ::testing::HasSubstr("out of range"));
  // 2^43 MiB is 2^63 bytes: past the int64 that memory_stats() reports max_split_size in.
  EXPECT_EQ(error_of("max_split_size_mb:8796093022208"),
            "Value '8796093022208' of max_split_size_mb in the CUDA allocator config is out of range");
  EXPECT_EQ(ember::detail::parse_alloc_conf("max_split_size_mb:8796093022207").max_split_size,
            size_t{8796093022207} << 20);
  EXPECT_EQ(error_of("garbage_collection_threshold:1.0"),
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0), but got 1.0");
  EXPECT_EQ(error_of("garbage_collection_threshold:0"),
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0), but got 0");
  EXPECT_THAT(error_of("garbage_collection_threshold:half"),
              ::testing::StartsWith("Expected a number for garbage_collection_threshold"));
  EXPECT_EQ(error_of("roundup_power2_divisions:3"), "For roundups, the divisions has to be power of 2, but got 3");
  EXPECT_EQ(error_of("roundup_power2_divisions:[300:2]"),
            "For roundups, the intervals have to be power of 2, but got 300");
  EXPECT_EQ(error_of("expandable_segments:maybe"),
            "Expected a single True/False argument for expandable_segments, but got 'maybe'");
}

TEST(AllocConf, MalformedSyntaxIsAValueError) {
  EXPECT_EQ(error_of("max_split_size_mb"),
            "Expected 'key:value' in the CUDA allocator config, but got 'max_split_size_mb'");
  EXPECT_THAT(error_of("roundup_power2_divisions:[256:1"), ::testing::StartsWith("Unbalanced '['"));
  EXPECT_THAT(error_of("roundup_power2_divisions:256:1]"), ::testing::StartsWith("Unbalanced ']'"));
  EXPECT_THAT(error_of("roundup_power2_divisions:[256]"), ::testing::StartsWith("Expected 'size:divisions'"));
}

TEST(AllocConf, RoundupWithZeroDisablesAnInterval) {
  AllocatorConfig config = parse_alloc_conf("roundup_power2_divisions:[1:0,>:4]");
  EXPECT_EQ(config.divisions_for(1 * MiB), 0u);
  EXPECT_EQ(config.divisions_for(2 * MiB), 4u);
}

TEST(AllocConf, AllocatorModeOptions) {
  AllocatorConfig defaults = parse_alloc_conf("");
  EXPECT_FALSE(defaults.use_async_allocator);
  EXPECT_FALSE(defaults.pinned_use_host_register);
  EXPECT_EQ(defaults.pinned_num_register_threads, 1u);
  AllocatorConfig config = parse_alloc_conf(
      "backend:cudaMallocAsync,pinned_use_cuda_host_register:True,pinned_num_register_threads:8,expandable_segments:"
      "True");
  EXPECT_TRUE(config.use_async_allocator);
  EXPECT_TRUE(config.pinned_use_host_register);
  EXPECT_EQ(config.pinned_num_register_threads, 8u);
  EXPECT_TRUE(config.expandable_segments);
  EXPECT_FALSE(parse_alloc_conf("backend:native").use_async_allocator);
  EXPECT_EQ(parse_alloc_conf("pinned_num_register_threads:128").pinned_num_register_threads, 128u);
  EXPECT_EQ(parse_alloc_conf("pinned_num_register_threads:1").pinned_num_register_threads, 1u);
  EXPECT_FALSE(defaults.pinned_use_background_threads);
  EXPECT_TRUE(parse_alloc_conf("pinned_use_background_threads:True").pinned_use_background_threads);
  EXPECT_EQ(error_of("pinned_use_background_threads:1"),
            "Expected a single True/False argument for pinned_use_background_threads, but got '1'");
}

TEST(AllocConf, BadAllocatorModeOptionsAreValueErrors) {
  // PyTorch's messages (c10/cuda/CUDAAllocatorConfig.cpp), with the value that was given.
  EXPECT_EQ(error_of("backend:cudaMalloc"),
            "Unknown allocator backend, options are native and cudaMallocAsync, but got 'cudaMalloc'");
  EXPECT_EQ(error_of("backend:"), "Unknown allocator backend, options are native and cudaMallocAsync, but got ''");
  EXPECT_EQ(error_of("pinned_num_register_threads:6"), "Number of register threads has to be power of 2, got 6");
  EXPECT_EQ(error_of("pinned_num_register_threads:0"), "Number of register threads has to be power of 2, got 0");
  EXPECT_EQ(error_of("pinned_num_register_threads:256"),
            "Number of register threads should be less than or equal to 128, got 256");
  EXPECT_EQ(
      error_of("pinned_num_register_threads:x"),
      "Expected a non-negative integer for pinned_num_register_threads in the CUDA allocator config, but got 'x'");
  EXPECT_EQ(error_of("pinned_use_cuda_host_register:yes"),
            "Expected a single True/False argument for pinned_use_cuda_host_register, but got 'yes'");
  EXPECT_THAT(error_of("pinned_use_host_register:True"),
              ::testing::StartsWith("Unrecognized key 'pinned_use_host_register' in CUDA allocator config."));
  // A bad option anywhere rejects the whole value: nothing before it is applied.
  EXPECT_THAT(error_of("expandable_segments:True,backend:cudaMallocAsync,pinned_num_register_threads:3"),
              ::testing::StartsWith("Number of register threads"));
}

TEST(AllocConf, PerProcessMemoryFraction) {
  EXPECT_FALSE(parse_alloc_conf("").per_process_memory_fraction.has_value());
  EXPECT_EQ(parse_alloc_conf("per_process_memory_fraction:0.25").per_process_memory_fraction, 0.25);
  EXPECT_EQ(parse_alloc_conf("per_process_memory_fraction:0").per_process_memory_fraction, 0.0);
  EXPECT_EQ(parse_alloc_conf("per_process_memory_fraction:1").per_process_memory_fraction, 1.0);
  EXPECT_EQ(error_of("per_process_memory_fraction:1.5"),
            "per_process_memory_fraction is invalid, set it in [0.0, 1.0], but got 1.5");
  EXPECT_THAT(error_of("per_process_memory_fraction:x"),
              ::testing::StartsWith("Expected a number for per_process_memory_fraction"));
}

// Note [Allocator settings at run time]: PyTorch's parseArgs resets three keys to their
// defaults on every parse and leaves the others as they were.
TEST(AllocConf, ParsingOverTheSettingsInForce) {
  const AllocatorConfig in_force = parse_alloc_conf(
      "max_split_size_mb:64,roundup_power2_divisions:4,garbage_collection_threshold:0.5,expandable_segments:True,"
      "max_non_split_rounding_mb:40,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,"
      "per_process_memory_fraction:0.5");
  const AllocatorConfig next = parse_alloc_conf("pinned_num_register_threads:4", in_force);
  EXPECT_EQ(next.max_split_size, std::numeric_limits<size_t>::max());
  EXPECT_EQ(next.divisions_for(5 * MiB), 0u);
  EXPECT_EQ(next.garbage_collection_threshold, 0.0);
  EXPECT_TRUE(next.expandable_segments);
  EXPECT_EQ(next.max_non_split_rounding_size, 40 * MiB);
  EXPECT_TRUE(next.release_lock_on_malloc);
  EXPECT_TRUE(next.pinned_use_host_register);
  EXPECT_EQ(next.pinned_num_register_threads, 4u);
  EXPECT_EQ(next.per_process_memory_fraction, 0.5);
  EXPECT_FALSE(parse_alloc_conf("expandable_segments:False", in_force).expandable_segments);
}

TEST(AllocConf, EnvironmentIsReadOnceAndAMalformedValueKeepsFailing) {
  // The only test touching the process-wide config: it is frozen by the first success.
  // PYTORCH_ALLOC_CONF is read; its deprecated alias only when it is unset.
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:100", 1);
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:10", 1);
  EXPECT_THROW(env_alloc_config(), ValueError);
  EXPECT_THROW(env_alloc_config(), ValueError);  // not silently replaced by defaults
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:64", 1);
  ::setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
  const AllocatorConfig& config = env_alloc_config();
  EXPECT_EQ(config.max_split_size, 64 * MiB);
  EXPECT_FALSE(config.caching_enabled);
  EXPECT_EQ(last_allocator_settings(), "max_split_size_mb:64");
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:100", 1);
  EXPECT_EQ(env_alloc_config().max_split_size, 64 * MiB);
}

}  // namespace
}  // namespace ember::detail
