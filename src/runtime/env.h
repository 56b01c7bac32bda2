// Environment variables read by the runtime, and their value parsers (pure, tested).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ember::detail {

/// The variable's value; nullopt when unset.
std::optional<std::string> env_value(const char* name);

/// A byte size: an integer or decimal number with an optional unit, case-insensitive,
/// optionally separated by spaces: B; KiB, MiB, GiB, TiB (powers of 1024); KB, MB, GB, TB
/// (powers of 1000, as SI defines them). "8GiB", "1.5 GiB", "512MiB", "1073741824", "64KB".
/// Fractions of a byte round down. Throws ValueError naming `what` and the value on bad
/// input and on zero.
size_t parse_memory_size(std::string_view text, const char* what);

/// A positive device count (1..64). Throws ValueError naming `what` and the value.
int parse_device_count(std::string_view text, const char* what);

/// True when the variable is set to a non-zero integer (CUDA_LAUNCH_BLOCKING=1), as
/// PyTorch reads it with atoi.
bool env_flag(const char* name);

/// A variable ember reads, and what it controls.
struct EnvVariable {
  const char* name;
  const char* meaning;
};

/// Every environment variable ember reads (ember-info lists them with their values).
/// A module that reads a new variable adds it here.
std::span<const EnvVariable> env_variables() noexcept;

/// Most devices ember handles (CUDA's visible-device limit as PyTorch assumes it).
inline constexpr int kMaxDevices = 64;

}  // namespace ember::detail
