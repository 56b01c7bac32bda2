// StackTrace: unwinder capture, libdw symbolisation cached per address.
#include "core/stack_trace.h"

#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#define BACKWARD_HAS_DW 1
#include <backward.hpp>

namespace ember::detail {

namespace {

constexpr int kMaxFrames = 256;

// libunwind's unw_backtrace caches how to step over each return address, so a capture
// costs some 20 ns a frame against libgcc's 400 (the unwinder C++ exceptions use, which
// is the fallback). It is opened with RTLD_LOCAL and never linked: libunwind also
// defines the _Unwind_* functions, and those must not interpose on libgcc's.
using BacktraceFn = int (*)(void**, int);

BacktraceFn libunwind_backtrace() {
#if defined(__SANITIZE_THREAD__)
  // libunwind frees its per-thread cache from a thread-exit destructor that locks a
  // mutex after ThreadSanitizer has dropped the thread's state, which crashes it.
  return nullptr;
#endif
  static const BacktraceFn fn = []() -> BacktraceFn {
    void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    return handle ? reinterpret_cast<BacktraceFn>(dlsym(handle, "unw_backtrace")) : nullptr;
  }();
  return fn;
}

struct UnwindState {
  std::vector<void*>* out;
  int skip;
  int max_depth;
};

_Unwind_Reason_Code unwind_one(struct _Unwind_Context* context, void* arg) {
  auto& state = *static_cast<UnwindState*>(arg);
  int before_instruction = 0;
  uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
  if (ip == 0) return _URC_END_OF_STACK;
  if (state.skip > 0) {
    --state.skip;
    return _URC_NO_REASON;
  }
  if (before_instruction) ip += 1;  // a signal frame: stored as if it were a return address
  state.out->push_back(reinterpret_cast<void*>(ip));
  return static_cast<int>(state.out->size()) >= state.max_depth ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// One resolver for the process (libdw reads the modules' debug information
// once) and one cache entry per address ever symbolised.
class SymbolCache {
 public:
  static SymbolCache& instance() {
    static auto* cache = new SymbolCache();  // leaked: traces may be printed during exit
    return *cache;
  }

  std::vector<StackFrame> resolve(void* address) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(address);
    if (it != cache_.end()) return it->second;
    backward::ResolvedTrace trace = resolver_.resolve(backward::ResolvedTrace(backward::Trace(address, 0)));
    // backward's libdw resolver gives the real (outermost) function in `source.function`
    // with the innermost source location, and in `inliners` each inlined function,
    // innermost first, with the location it was called from. Rebuild one frame per
    // function: each inlined one at the location inside it, the real one last.
    std::vector<StackFrame> frames;
    std::string file = trace.source.filename;
    int line = static_cast<int>(trace.source.line);
    for (const auto& inlined : trace.inliners) {
      frames.push_back(StackFrame{inlined.function, file, line});
      file = inlined.filename;
      line = static_cast<int>(inlined.line);
    }
    // The symbol table's name is qualified ("ns::Class::method"); debug information's is not.
    std::string outer = trace.object_function.empty() ? trace.source.function : trace.object_function;
    frames.push_back(StackFrame{outer, file, line});
    cache_.emplace(address, frames);
    return frames;
  }

 private:
  std::mutex mutex_;
  backward::TraceResolver resolver_;
  std::unordered_map<void*, std::vector<StackFrame>> cache_;
};

}  // namespace

StackTrace StackTrace::capture(int skip, int max_depth) {
  StackTrace trace;
  if (max_depth <= 0) return trace;
  skip = std::max(skip, 0) + 1;  // capture() itself
  max_depth = std::min(max_depth, kMaxFrames - skip);
  if (BacktraceFn backtrace = libunwind_backtrace()) {
    void* buffer[kMaxFrames];
    int count = backtrace(buffer, skip + max_depth);
    if (count > skip) trace.addresses_.assign(buffer + skip, buffer + count);
    return trace;
  }
  trace.addresses_.reserve(static_cast<size_t>(max_depth));
  UnwindState state{&trace.addresses_, skip, max_depth};
  _Unwind_Backtrace(&unwind_one, &state);
  return trace;
}

std::vector<StackFrame> StackTrace::frames() const {
  std::vector<StackFrame> out;
  out.reserve(addresses_.size());
  for (void* address : addresses_) {
    // A return address is the instruction after the call: look up the call itself.
    void* call = static_cast<char*>(address) - 1;
    for (auto& frame : SymbolCache::instance().resolve(call)) out.push_back(std::move(frame));
  }
  return out;
}

std::string StackTrace::str() const {
  std::string out;
  int index = 0;
  for (const StackFrame& frame : frames()) {
    out += "  #" + std::to_string(index++) + " ";
    out += frame.function.empty() ? std::string("??") : frame.function;
    if (!frame.file.empty()) {
      out += " at " + frame.file;
      if (frame.line > 0) out += ":" + std::to_string(frame.line);
    }
    out += "\n";
  }
  return out;
}

}  // namespace ember::detail
