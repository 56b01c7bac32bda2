// Parsing of PYTORCH_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF), PYTORCH_NO_CUDA_MEMORY_CACHING and
// set_allocator_settings' values (Note [Allocator settings at run time] in alloc_conf.h).
#include "memory/alloc_conf.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "ember/errors.h"

namespace ember::detail {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kLargeBufferMiB = 20;             // max_split_size_mb must be at least the 20 MiB segment
constexpr size_t kPinnedMaxRegisterThreads = 128;  // PyTorch's pinned_max_register_threads()

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on `sep` outside brackets, so a roundup list stays one option.
std::vector<std::string_view> split_top_level(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    EMBER_CHECK(depth >= 0, ValueError, "Unbalanced ']' in the CUDA allocator config: '", s, "'");
    if (s[i] == sep && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  EMBER_CHECK(depth == 0, ValueError, "Unbalanced '[' in the CUDA allocator config: '", s, "'");
  parts.push_back(trim(s.substr(start)));
  return parts;
}

size_t parse_unsigned(std::string_view key, std::string_view value) {
  EMBER_CHECK(!value.empty(), ValueError, "Expected a non-negative integer for ", key,
              " in the CUDA allocator config, but got ''");
  size_t result = 0;
  for (char c : value) {
    EMBER_CHECK(c >= '0' && c <= '9', ValueError, "Expected a non-negative integer for ", key,
                " in the CUDA allocator config, but got '", value, "'");
    EMBER_CHECK(result <= (std::numeric_limits<size_t>::max() - 9) / 10, ValueError, "Value '", value, "' of ", key,
                " in the CUDA allocator config is out of range");
    result = result * 10 + static_cast<size_t>(c - '0');
  }
  return result;
}

double parse_fraction(std::string_view key, std::string_view value) {
  std::string text(value);
  char* end = nullptr;
  double result = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size(), ValueError, "Expected a number for ", key,
              " in the CUDA allocator config, but got '", value, "'");
  return result;
}

void check_divisions(size_t divisions, bool zero_allowed) {
  EMBER_CHECK((zero_allowed && divisions == 0) || std::has_single_bit(divisions), ValueError,
              "For roundups, the divisions has to be power of 2", zero_allowed ? " or 0 to disable roundup" : "",
              ", but got ", divisions);
}

void parse_roundup(std::string_view value, AllocatorConfig& config) {
  auto& table = config.roundup_power2_divisions;
  if (value.empty() || value.front() != '[') {
    size_t divisions = parse_unsigned("roundup_power2_divisions", value);
    check_divisions(divisions, false);
    table.fill(divisions);
    return;
  }
  EMBER_CHECK(value.back() == ']', ValueError, "Expected ']' to close roundup_power2_divisions list, but got '", value,
              "'");
  bool first = true;
  size_t last_index = 0;
  for (std::string_view entry : split_top_level(value.substr(1, value.size() - 2), ',')) {
    size_t colon = entry.find(':');
    EMBER_CHECK(colon != std::string_view::npos, ValueError,
                "Expected 'size:divisions' in roundup_power2_divisions list, but got '", entry, "'");
    std::string_view interval = trim(entry.substr(0, colon));
    size_t divisions = parse_unsigned("roundup_power2_divisions", trim(entry.substr(colon + 1)));
    check_divisions(divisions, true);
    if (interval == ">") {
      for (size_t i = first ? 0 : last_index + 1; i < table.size(); ++i) table[i] = divisions;
      continue;
    }
    size_t mib = parse_unsigned("roundup_power2_divisions", interval);
    EMBER_CHECK(std::has_single_bit(mib), ValueError, "For roundups, the intervals have to be power of 2, but got ",
                mib);
    size_t index = std::min<size_t>(std::bit_width(mib) - 1, table.size() - 1);
    if (first) {
      for (size_t i = 0; i < index; ++i) table[i] = divisions;
      first = false;
    }
    table[index] = divisions;
    last_index = index;
  }
}

// PyTorch 2.x takes exactly these two spellings.
bool parse_bool(std::string_view key, std::string_view value) {
  if (value == "True") return true;
  if (value == "False") return false;
  fail<ValueError>("Expected a single True/False argument for ", key, ", but got '", value, "'");
}

// max_split_size_mb and max_non_split_rounding_mb: MiB, at least the 20 MiB large segment
// (PyTorch 2.8's bound; earlier 2.x releases wanted more than 20).
size_t parse_split_mib(std::string_view key, std::string_view value) {
  size_t mib = parse_unsigned(key, value);
  EMBER_CHECK(mib >= kLargeBufferMiB, ValueError, "CachingAllocator option ", key,
              " too small, must be >= ", kLargeBufferMiB, ", but got ", mib);
  // In bytes it must fit the int64 that memory_stats() reports it in.
  EMBER_CHECK(mib <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / kMiB, ValueError, "Value '", value,
              "' of ", key, " in the CUDA allocator config is out of range");
  return mib * kMiB;
}

constexpr const char* kKnownKeys =
    "max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, "
    "expandable_segments, release_lock_on_cudamalloc, backend, pinned_use_cuda_host_register, "
    "pinned_num_register_threads, pinned_use_background_threads or per_process_memory_fraction";

}  // namespace

size_t AllocatorConfig::divisions_for(size_t size) const noexcept {
  // Index 0 covers everything below 2 MiB, the last one everything from 32 GiB up.
  int log_size = static_cast<int>(std::bit_width(size)) - 1;
  int index = std::clamp(log_size - 20, 0, static_cast<int>(kRoundupPower2Intervals) - 1);
  return roundup_power2_divisions[static_cast<size_t>(index)];
}

AllocatorConfig parse_alloc_conf(std::string_view conf, const AllocatorConfig& base) {
  AllocatorConfig config = base;
  // PyTorch's parseArgs starts these three from their defaults every time.
  const AllocatorConfig defaults;
  config.max_split_size = defaults.max_split_size;
  config.roundup_power2_divisions = defaults.roundup_power2_divisions;
  config.garbage_collection_threshold = defaults.garbage_collection_threshold;
  if (trim(conf).empty()) return config;
  std::vector<std::string_view> options = split_top_level(conf, ',');
  // PyTorch's tokenizer lets one comma end the value; any other empty option is a ','
  // where a key should be.
  if (options.size() > 1 && options.back().empty()) options.pop_back();
  for (std::string_view option : options) {
    EMBER_CHECK(!option.empty(), ValueError, "Unrecognized key ',' in CUDA allocator config. (An empty option in '",
                conf, "'; expected ", kKnownKeys, ")");
    size_t colon = option.find(':');
    EMBER_CHECK(colon != std::string_view::npos, ValueError,
                "Expected 'key:value' in the CUDA allocator config, but got '", option, "'");
    std::string_view key = trim(option.substr(0, colon));
    std::string_view value = trim(option.substr(colon + 1));
    if (key == "max_split_size_mb") {
      config.max_split_size = parse_split_mib(key, value);
    } else if (key == "max_non_split_rounding_mb") {
      config.max_non_split_rounding_size = parse_split_mib(key, value);
    } else if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") {
      config.release_lock_on_malloc = parse_bool(key, value);
    } else if (key == "roundup_power2_divisions") {
      parse_roundup(value, config);
    } else if (key == "garbage_collection_threshold") {
      double threshold = parse_fraction(key, value);
      EMBER_CHECK(threshold > 0.0 && threshold < 1.0, ValueError,
                  "garbage_collect_threshold is invalid, set it in (0.0, 1.0), but got ", value);
      config.garbage_collection_threshold = threshold;
    } else if (key == "expandable_segments") {
      config.expandable_segments = parse_bool(key, value);
    } else if (key == "backend") {
      EMBER_CHECK(value == "native" || value == "cudaMallocAsync", ValueError,
                  "Unknown allocator backend, options are native and cudaMallocAsync, but got '", value, "'");
      config.use_async_allocator = value == "cudaMallocAsync";
    } else if (key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register") {
      config.pinned_use_host_register = parse_bool(key, value);
    } else if (key == "pinned_num_register_threads") {
      size_t threads = parse_unsigned(key, value);
      EMBER_CHECK(std::has_single_bit(threads), ValueError, "Number of register threads has to be power of 2, got ",
                  threads);
      EMBER_CHECK(threads <= kPinnedMaxRegisterThreads, ValueError,
                  "Number of register threads should be less than or equal to ", kPinnedMaxRegisterThreads, ", got ",
                  threads);
      config.pinned_num_register_threads = threads;
    } else if (key == "pinned_use_background_threads") {
      config.pinned_use_background_threads = parse_bool(key, value);
    } else if (key == "per_process_memory_fraction") {
      double fraction = parse_fraction(key, value);
      EMBER_CHECK(fraction >= 0.0 && fraction <= 1.0, ValueError,
                  "per_process_memory_fraction is invalid, set it in [0.0, 1.0], but got ", value);
      config.per_process_memory_fraction = fraction;
    } else {
      fail<ValueError>("Unrecognized key '", key, "' in CUDA allocator config. (Expected ", kKnownKeys, ")");
    }
  }
  return config;
}

AllocConfEnv choose_alloc_conf_env(const char* alloc_conf, const char* cuda_alloc_conf) {
  if (alloc_conf != nullptr) return {alloc_conf, false};
  if (cuda_alloc_conf != nullptr) return {cuda_alloc_conf, true};
  return {};
}

namespace {

// The environment's settings and their text, parsed once (a malformed value throws at
// every call instead of falling back to the defaults).
struct EnvSettings {
  AllocatorConfig config;
  std::string text;
};

const EnvSettings& env_settings() {
  static const EnvSettings settings = [] {
    AllocConfEnv env = choose_alloc_conf_env(std::getenv("PYTORCH_ALLOC_CONF"), std::getenv("PYTORCH_CUDA_ALLOC_CONF"));
    EnvSettings result{parse_alloc_conf(env.value.value_or("")), env.value.value_or("")};
    if (env.deprecated_alias)
      std::cerr << "UserWarning: PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF instead\n";
    // PyTorch checks only that the variable is set (any value, even "0").
    result.config.caching_enabled = std::getenv("PYTORCH_NO_CUDA_MEMORY_CACHING") == nullptr;
    return result;
  }();
  return settings;
}

// The settings in force (Note [Allocator settings at run time]).
struct CurrentSettings {
  std::mutex mutex;
  std::optional<EnvSettings> settings;  // empty until first asked for
};

CurrentSettings& current() {
  static auto* instance = new CurrentSettings;  // leaked: allocators are made during static destruction too
  return *instance;
}

// With current().mutex held.
EnvSettings& current_locked() {
  CurrentSettings& state = current();
  if (!state.settings) state.settings = env_settings();
  return *state.settings;
}

}  // namespace

const AllocatorConfig& env_alloc_config() {
  // Read once: changing the environment later must not change a running allocator.
  return env_settings().config;
}

AllocatorConfig current_alloc_config() {
  std::lock_guard lock(current().mutex);
  return current_locked().config;
}

std::string last_allocator_settings() {
  std::lock_guard lock(current().mutex);
  return current_locked().text;
}

AllocatorConfig update_alloc_config(std::string_view settings) {
  std::lock_guard lock(current().mutex);
  EnvSettings& in_force = current_locked();
  AllocatorConfig parsed = parse_alloc_conf(settings, in_force.config);
  auto name = [](const AllocatorConfig& config) { return config.use_async_allocator ? "cudaMallocAsync" : "native"; };
  EMBER_CHECK(parsed.use_async_allocator == in_force.config.use_async_allocator, Error,
              "Allocator backend parsed at runtime != allocator backend parsed at load time, ", name(parsed),
              " != ", name(in_force.config));
  in_force.config = parsed;
  in_force.text = settings;
  return parsed;
}

}  // namespace ember::detail
