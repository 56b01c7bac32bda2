// The hook through which Tensor::data_ptr() reports a host access.
//
// Note [Host access hook]
// data_ptr() hands the program a pointer it may write through: for pinned memory that a
// pending copy may still use, the stream sanitizer must check that write (Note [Host
// accesses] in src/sanitizer/sanitizer.cpp). The sanitizer sits above core, so it installs
// this hook while it is enabled and removes it when disabled; with it off, data_ptr() pays
// one relaxed load.
#pragma once

#include <atomic>

namespace ember::detail {

class TensorImpl;

/// Called with the tensor whose pinned memory the host is about to access.
using HostAccessHook = void (*)(const TensorImpl& impl, bool write, const char* op);

extern std::atomic<HostAccessHook> g_pinned_host_access_hook;

}  // namespace ember::detail
