// A worker's exception, rethrown in the consuming thread as PyTorch's ExceptionWrapper does.
#pragma once

#include <exception>
#include <string>

namespace ember::data::detail {

/// Rethrows `error` with "Caught <Type> <where>.\n" in front of its message, where is e.g.
/// "in DataLoader worker process 1". ember's error types and the standard ones keep their
/// type, and a standard one what it carries besides its message (a system_error's code);
/// any other type becomes an ember::Error (Note [Worker errors keep their type]).
[[noreturn]] void rethrow_caught(const std::exception_ptr& error, const std::string& where);

}  // namespace ember::data::detail
