// Rethrowing a worker's exception in the consuming thread with where it was caught.
//
// Note [Worker errors keep their type]
// PyTorch's ExceptionWrapper re-raises exc_type("Caught <Type> <where>.\n" + message). In
// C++ a new exception built from a message alone would lose what a standard exception
// carries besides it (a system_error's code, a filesystem_error's paths) and cannot be built
// at all for the types without a message constructor (bad_alloc, bad_optional_access, ...).
// So a standard exception is rethrown as WithContext<T>: a copy of the original, caught as
// the most derived standard type it is, whose what() has the worker context in front. A
// `catch (const std::system_error& e)` sees e.code() as the worker threw it. ember's error
// types carry only their message and are rebuilt from the longer one.
#include "data/worker_error.h"

#include <cxxabi.h>

#include <any>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <ios>
#include <memory>
#include <new>
#include <optional>
#include <regex>
#include <stdexcept>
#include <system_error>
#include <typeinfo>
#include <variant>

#include "ember/errors.h"

namespace ember::data::detail {
namespace {

// The dynamic type of the exception being handled, demangled, without "ember::" or the
// ABI tags of libstdc++ ("std::filesystem::__cxx11::filesystem_error" reads as
// "std::filesystem::filesystem_error").
std::string current_type_name() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "exception";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  std::string result = status == 0 && name ? name.get() : type->name();
  if (result.rfind("ember::", 0) == 0) result.erase(0, 7);
  for (std::string tag : {"__cxx11::", "[abi:cxx11]"})
    for (size_t at; (at = result.find(tag)) != std::string::npos;) result.erase(at, tag.size());
  return result;
}

// A copy of the standard exception `original` whose what() is `message`
// (Note [Worker errors keep their type]).
template <typename T>
class WithContext final : public T {
 public:
  WithContext(const T& original, std::string message)
      : T(original), message_(std::make_shared<const std::string>(std::move(message))) {}
  const char* what() const noexcept override { return message_->c_str(); }

 private:
  std::shared_ptr<const std::string> message_;  // shared: copying an exception must not throw
};

}  // namespace

void rethrow_caught(const std::exception_ptr& error, const std::string& where) {
  std::string type;
  auto message = [&](const std::exception& e) { return "Caught " + type + " " + where + ".\n" + e.what(); };
  // Standard types, most derived first.
#define EMBER_RETHROW_STD(T)             \
  catch (const T& e) {                   \
    throw WithContext<T>(e, message(e)); \
  }
  try {
    std::rethrow_exception(error);
  } catch (...) {
    type = current_type_name();
    try {
      throw;
    }
    // ember's types first: ember::Error is a std::runtime_error.
    catch (const ValueError& e) {
      throw ValueError(message(e));
    } catch (const IndexError& e) {
      throw IndexError(message(e));
    } catch (const TypeError& e) {
      throw TypeError(message(e));
    } catch (const DeviceError& e) {
      throw DeviceError(message(e));
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(message(e));
    } catch (const CudaError& e) {
      throw CudaError(message(e));
    } catch (const DistributedError& e) {
      throw DistributedError(message(e));
    } catch (const DataRaceError& e) {
      throw DataRaceError(message(e));
    } catch (const Error& e) {
      throw Error(message(e));
    }
    EMBER_RETHROW_STD(std::filesystem::filesystem_error)
    EMBER_RETHROW_STD(std::ios_base::failure)
    EMBER_RETHROW_STD(std::system_error)
    EMBER_RETHROW_STD(std::regex_error)
    EMBER_RETHROW_STD(std::range_error)
    EMBER_RETHROW_STD(std::overflow_error)
    EMBER_RETHROW_STD(std::underflow_error)
    EMBER_RETHROW_STD(std::runtime_error)
    EMBER_RETHROW_STD(std::future_error)
    EMBER_RETHROW_STD(std::invalid_argument)
    EMBER_RETHROW_STD(std::domain_error)
    EMBER_RETHROW_STD(std::length_error)
    EMBER_RETHROW_STD(std::out_of_range)
    EMBER_RETHROW_STD(std::logic_error)
    EMBER_RETHROW_STD(std::bad_array_new_length)
    EMBER_RETHROW_STD(std::bad_alloc)
    EMBER_RETHROW_STD(std::bad_any_cast)
    EMBER_RETHROW_STD(std::bad_cast)
    EMBER_RETHROW_STD(std::bad_typeid)
    EMBER_RETHROW_STD(std::bad_weak_ptr)
    EMBER_RETHROW_STD(std::bad_function_call)
    EMBER_RETHROW_STD(std::bad_optional_access)
    EMBER_RETHROW_STD(std::bad_variant_access)
    EMBER_RETHROW_STD(std::bad_exception)
    // Any other type: PyTorch's fallback when exc_type(msg) cannot be built.
    catch (const std::exception& e) {
      throw Error(message(e));
    }
    catch (...) {
      throw Error("Caught " + type + " " + where + ".\n(not a std::exception)");
    }
  }
#undef EMBER_RETHROW_STD
}

}  // namespace ember::data::detail
