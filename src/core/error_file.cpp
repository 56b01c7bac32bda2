// The error file of a rank that dies with an uncaught exception (torchrun's record()).
//
// Note [Error file]
// torchrun and ember-run give every rank TORCHELASTIC_ERROR_FILE, a path; a Python worker
// whose main is decorated with torch.distributed.elastic.multiprocessing.errors.record
// writes its uncaught exception there as JSON, and the launcher prints it as the failure's
// root cause. An ember program has no decorator to forget: when libember is loaded with
// TORCHELASTIC_ERROR_FILE set, it installs a std::terminate handler (chained to the one
// before it, which prints and aborts) that writes the same JSON for the exception that
// reaches terminate, uncaught in main or in a thread:
//   {"message": {"message": "ValueError: <what()>",
//                "extraInfo": {"py_callstack": "<type: what() and the stack>", "timestamp": "<unix s>"}}}
// The type is the exception's C++ class without the "ember::" namespace (ValueError,
// IndexError, TypeError match Python's names). With no exception (terminate called
// directly) nothing is written. An uncaught exception is not unwound before terminate
// (the unwinder finds no handler and calls it at the throw), so the stack captured here
// is the throwing one.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>

#include "core/stack_trace.h"

namespace ember::detail {
namespace {

std::terminate_handler g_previous = nullptr;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

/// The current exception's class, demangled, "ember::" dropped.
std::string current_type_name() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (!type) return "exception";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status),
                                                    &std::free);
  std::string out = status == 0 && name ? name.get() : type->name();
  if (out.rfind("ember::", 0) == 0) out = out.substr(7);
  return out;
}

void write_error_file(const char* path) {
  std::exception_ptr current = std::current_exception();
  if (!current) return;
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::string message = current_type_name() + ": " + what;
  // The frames above the throw: from the caller of __cxa_throw (terminate and this
  // handler are below it).
  std::string stack;
  auto frames = StackTrace::capture().frames();
  size_t first = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].function.find("__cxa_throw") != std::string::npos ||
        frames[i].function.find("__cxa_rethrow") != std::string::npos) {
      first = i + 1;
    }
  }
  for (size_t i = first; i < frames.size(); ++i) {
    const auto& f = frames[i];
    stack += "  #" + std::to_string(i - first) + " " + (f.function.empty() ? "??" : f.function);
    if (!f.file.empty()) stack += " at " + f.file + ":" + std::to_string(f.line);
    stack += "\n";
  }
  if (!stack.empty()) stack.pop_back();
  std::string callstack = message + (stack.empty() ? "" : "\n" + stack);
  std::string json = "{\"message\": {\"message\": " + json_string(message) +
                     ", \"extraInfo\": {\"py_callstack\": " + json_string(callstack) + ", \"timestamp\": \"" +
                     std::to_string(static_cast<long long>(std::time(nullptr))) + "\"}}}";
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
}

[[noreturn]] void on_terminate() {
  if (const char* path = std::getenv("TORCHELASTIC_ERROR_FILE"); path && *path) {
    try {
      write_error_file(path);
    } catch (...) {
    }
  }
  if (g_previous) g_previous();
  std::abort();
}

struct InstallErrorFileHandler {
  InstallErrorFileHandler() {
    const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
    if (path && *path) g_previous = std::set_terminate(on_terminate);
  }
};
const InstallErrorFileHandler g_install;

}  // namespace
}  // namespace ember::detail
