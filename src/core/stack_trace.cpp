// StackTrace: unwinder capture, libdw symbolisation cached per address.
#include "core/stack_trace.h"

#include <unwind.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

#define BACKWARD_HAS_DW 1
#include <backward.hpp>

namespace ember::detail {

namespace {

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
  // Keep the address inside the call instruction, so symbolisation names the
  // caller's line rather than the one after it.
  if (!before_instruction) ip -= 1;
  state.out->push_back(reinterpret_cast<void*>(ip));
  return static_cast<int>(state.out->size()) >= state.max_depth ? _URC_END_OF_STACK
                                                                 : _URC_NO_REASON;
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
    std::vector<StackFrame> frames;
    // backward lists the innermost source location in `source` and the
    // functions it was inlined into, innermost first, in `inliners`.
    auto frame_of = [&](const backward::ResolvedTrace::SourceLoc& loc) {
      StackFrame frame;
      frame.function = loc.function.empty() ? trace.object_function : loc.function;
      frame.file = loc.filename;
      frame.line = static_cast<int>(loc.line);
      return frame;
    };
    frames.push_back(frame_of(trace.source));
    for (const auto& loc : trace.inliners) frames.push_back(frame_of(loc));
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
  trace.addresses_.reserve(static_cast<size_t>(max_depth));
  // +1 drops capture() itself.
  UnwindState state{&trace.addresses_, skip + 1, max_depth};
  _Unwind_Backtrace(&unwind_one, &state);
  return trace;
}

std::vector<StackFrame> StackTrace::frames() const {
  std::vector<StackFrame> out;
  out.reserve(addresses_.size());
  for (void* address : addresses_) {
    for (auto& frame : SymbolCache::instance().resolve(address)) out.push_back(std::move(frame));
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
