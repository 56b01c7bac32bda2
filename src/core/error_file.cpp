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
// The file is JSON of ASCII alone, whatever the message's bytes (an exception's text can
// hold a file name or user data in any encoding, and torchrun's agent fails to read a file
// that is not UTF-8, losing the report): UTF-8 characters past ASCII are written as \u
// escapes, and a byte that is not part of a well-formed UTF-8 sequence as the \u escape of
// its Latin-1 reading (0xff is \u00ff), so that every byte stays in the report.
#include <cxxabi.h>

#include <cstdint>
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

/// The length of the well-formed UTF-8 sequence at s[i] (its code point in *code_point),
/// 0 when the bytes there are not one (a stray continuation byte, a truncated sequence,
/// an overlong form, a surrogate, past U+10FFFF).
size_t utf8_sequence(const std::string& s, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  size_t length = lead < 0x80             ? 1
                  : (lead & 0xE0) == 0xC0 ? 2
                  : (lead & 0xF0) == 0xE0 ? 3
                  : (lead & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (length == 0 || i + length > s.size()) return 0;
  uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *code_point = cp;
  return length;
}

/// `s` as a JSON string of ASCII alone, whatever its bytes (Note [Error file]).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  auto escape = [&](uint32_t unit) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(unit));
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t length = utf8_sequence(s, i, &cp);
    if (length == 0) {
      escape(static_cast<unsigned char>(s[i]));  // not UTF-8: the byte as Latin-1
      ++i;
      continue;
    }
    i += length;
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp >= 0x20 && cp < 0x7F) {
          out += static_cast<char>(cp);
        } else if (cp < 0x10000) {
          escape(cp);
        } else {  // a surrogate pair
          escape(0xD800 + ((cp - 0x10000) >> 10));
          escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
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
