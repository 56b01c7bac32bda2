// StackTrace: where a call came from, captured cheaply and symbolised later.
//
// capture() walks the stack (libunwind's unw_backtrace when libunwind.so.8 is
// present, else libgcc's unwinder) and keeps raw return addresses only (no allocation beyond the address vector, no
// symbol lookup), so hot paths (the stream sanitizer's accesses, allocation records in memory snapshots) can afford one
// per call. frames() and str() symbolise on demand through libdw (backward-cpp's resolver); each address is resolved
// once per process and cached, so reports that print many traces sharing frames stay cheap. Without debug information a
// frame still names its function (from the symbol table) and leaves file and line empty.
#pragma once

#include <string>
#include <vector>

namespace ember::detail {

struct StackFrame {
  std::string function;  // demangled; empty when the address has no symbol
  std::string file;      // source file; empty without debug information
  int line = 0;          // 0 when unknown
};

class StackTrace {
 public:
  StackTrace() = default;

  /// The calling thread's stack: `skip` frames above the caller of capture()
  /// are dropped (0 keeps the caller as frame 0), at most `max_depth` kept.
  static StackTrace capture(int skip = 0, int max_depth = 32);

  /// Return addresses, innermost first.
  const std::vector<void*>& addresses() const noexcept { return addresses_; }
  bool empty() const noexcept { return addresses_.empty(); }

  /// One frame per address (inlined calls expanded, innermost first).
  std::vector<StackFrame> frames() const;

  /// One "  #i function at file:line" per line ("  #i function" without a
  /// source location); empty for an empty trace.
  std::string str() const;

 private:
  std::vector<void*> addresses_;
};

}  // namespace ember::detail
