#include "runtime/env.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ember/errors.h"

namespace ember::detail {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<double> unit_multiplier(std::string_view unit) {
  std::string u = lower(unit);
  if (u.empty() || u == "b") return 1.0;
  constexpr double kKi = 1024.0, kK = 1000.0;
  if (u == "kib") return kKi;
  if (u == "mib") return kKi * kKi;
  if (u == "gib") return kKi * kKi * kKi;
  if (u == "tib") return kKi * kKi * kKi * kKi;
  if (u == "kb") return kK;
  if (u == "mb") return kK * kK;
  if (u == "gb") return kK * kK * kK;
  if (u == "tb") return kK * kK * kK * kK;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> env_value(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

size_t parse_memory_size(std::string_view text, const char* what) {
  auto bad = [&]() {
    fail<ValueError>(what, " must be a positive size such as 8GiB, 1.5GiB, 512MiB, 64KB or 1073741824, but got '", text,
                     "'");
  };
  std::string_view s = strip(text);
  size_t i = 0, digits = 0;
  bool seen_point = false;
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++digits;
    } else if (s[i] == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (digits == 0) bad();
  std::optional<double> multiplier = unit_multiplier(strip(s.substr(i)));
  if (!multiplier) bad();
  double bytes = std::floor(std::strtod(std::string(s.substr(0, i)).c_str(), nullptr) * *multiplier);
  if (!(bytes >= 1.0) || bytes > static_cast<double>(std::numeric_limits<size_t>::max() / 2)) bad();
  return static_cast<size_t>(bytes);
}

int parse_device_count(std::string_view text, const char* what) {
  std::string_view s = strip(text);
  int count = 0;
  bool ok = !s.empty() && s.size() <= 3;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) ok = false;
    else count = count * 10 + (c - '0');
  }
  EMBER_CHECK(ok && count >= 1 && count <= kMaxDevices, ValueError, what, " must be a number of devices between 1 and ",
              kMaxDevices, ", but got '", text, "'");
  return count;
}

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::atoi(value) != 0;
}

std::span<const EnvVariable> env_variables() noexcept {
  static constexpr EnvVariable kVariables[] = {
      {"CUDA_VISIBLE_DEVICES", "which devices are visible, and their order"},
      {"CUDA_LAUNCH_BLOCKING", "1: every launch waits and raises its own errors"},
      {"PYTORCH_ALLOC_CONF", "caching allocator options"},
      {"PYTORCH_CUDA_ALLOC_CONF", "caching allocator options when PYTORCH_ALLOC_CONF is unset (deprecated)"},
      {"PYTORCH_NO_CUDA_MEMORY_CACHING", "set: no caching of device memory"},
      {"CUBLAS_WORKSPACE_CONFIG", "size of each cuBLAS workspace (:SIZE_KiB:COUNT...)"},
      {"EMBER_EMULATED_DEVICES", "number of emulated cuda devices"},
      {"EMBER_EMULATED_MEMORY", "memory of each emulated device"},
      {"EMBER_NUM_THREADS", "threads of the cpu backend"},
      {"OMP_NUM_THREADS", "threads of the cpu backend when EMBER_NUM_THREADS is unset"},
      {"EMBER_CUDA_SANITIZER", "1: stream race sanitizer raises DataRaceError; warn: it prints"},
  };
  return kVariables;
}

}  // namespace ember::detail
