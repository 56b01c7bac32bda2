// Error hierarchy and the one user-error check macro.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

/// Base of every error ember throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad argument value (Python's ValueError).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// An index or device index out of range (Python's IndexError).
class IndexError : public Error {
 public:
  using Error::Error;
};

/// An argument of the wrong kind, e.g. a dtype an op does not support.
class TypeError : public Error {
 public:
  using Error::Error;
};

/// Tensors on incompatible devices.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// The caching allocator could not satisfy a request.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// A CUDA runtime or kernel error, including errors reported asynchronously.
class CudaError : public Error {
 public:
  using Error::Error;
};

/// A collective, store, rendezvous or peer failure in ember::distributed.
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// Two streams access the same memory without ordering (the stream sanitizer).
class DataRaceError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename E, typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw E(cat(args...));
}

[[noreturn]] void assert_failed(const char* expr, const char* file, int line);

}  // namespace detail
}  // namespace ember

/// Throws ember::Type with the concatenated message when cond is false.
#define EMBER_CHECK(cond, Type, ...)                     \
  do {                                                   \
    if (!(cond)) [[unlikely]]                            \
      ::ember::detail::fail<::ember::Type>(__VA_ARGS__); \
  } while (false)

/// Internal invariant; a failure is a bug in ember, not in the caller.
#define EMBER_ASSERT(cond)                                       \
  do {                                                           \
    if (!(cond)) [[unlikely]]                                    \
      ::ember::detail::assert_failed(#cond, __FILE__, __LINE__); \
  } while (false)
