// Rethrowing a worker's exception in the consuming thread with where it was caught.
#include "data/worker_error.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <typeinfo>

#include "ember/errors.h"

namespace ember::data::detail {
namespace {

// The dynamic type of the exception being handled, demangled, without "ember::".
std::string current_type_name() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "exception";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status),
                                               std::free);
  std::string result = status == 0 && name ? name.get() : type->name();
  if (result.rfind("ember::", 0) == 0) result.erase(0, 7);
  return result;
}

}  // namespace

void rethrow_caught(const std::exception_ptr& error, const std::string& where) {
  std::string type;
  auto message = [&](const std::exception& e) { return "Caught " + type + " " + where + ".\n" + e.what(); };
  try {
    std::rethrow_exception(error);
  } catch (...) {
    type = current_type_name();
    try {
      throw;
    }
    // ember's types first: ember::Error is a std::runtime_error.
    catch (const ValueError& e) { throw ValueError(message(e)); }
    catch (const IndexError& e) { throw IndexError(message(e)); }
    catch (const TypeError& e) { throw TypeError(message(e)); }
    catch (const DeviceError& e) { throw DeviceError(message(e)); }
    catch (const OutOfMemoryError& e) { throw OutOfMemoryError(message(e)); }
    catch (const CudaError& e) { throw CudaError(message(e)); }
    catch (const DistributedError& e) { throw DistributedError(message(e)); }
    catch (const DataRaceError& e) { throw DataRaceError(message(e)); }
    catch (const Error& e) { throw Error(message(e)); }
    catch (const std::invalid_argument& e) { throw std::invalid_argument(message(e)); }
    catch (const std::domain_error& e) { throw std::domain_error(message(e)); }
    catch (const std::length_error& e) { throw std::length_error(message(e)); }
    catch (const std::out_of_range& e) { throw std::out_of_range(message(e)); }
    catch (const std::logic_error& e) { throw std::logic_error(message(e)); }
    catch (const std::range_error& e) { throw std::range_error(message(e)); }
    catch (const std::overflow_error& e) { throw std::overflow_error(message(e)); }
    catch (const std::underflow_error& e) { throw std::underflow_error(message(e)); }
    catch (const std::runtime_error& e) { throw std::runtime_error(message(e)); }
    catch (const std::exception& e) { throw Error(message(e)); }
    catch (...) { throw Error("Caught " + type + " " + where + ".\n(not a std::exception)"); }
  }
}

}  // namespace ember::data::detail
