// LaunchRecord: a kernel launch as an emulated stream's queue holds it.
//
// Note [Emulated launch record]
// A KernelCall is laid out to be built and read, not copied: room inline for three
// operands a side with six dims each, about a kilobyte of which a small op uses a tenth,
// and copying one field by field walks every operand's shape vectors. The queue entry
// holds instead what the launch uses, packed into a buffer the entry keeps: the call's
// arguments, then per operand its address, dtype, sizes and strides (a binary op on 1-D
// tensors: about 200 bytes). The host writes three or four cache lines instead of a dozen,
// and those lines are also what the worker's core must give back when the host next
// refills the entry. The worker unpacks the record into a KernelCall of its own, whose
// vectors keep their capacity, and runs that. The buffer grows (on the host) only for a
// launch wider than any the entry has held, so a steady stream of launches allocates
// nothing. The payload (a shared_ptr) stays a member: the worker borrows it for the run
// and gives it back, so the host, which made it, is where it is released.
//
// pack() and unpack() name every field of KernelCall; the static_assert below fails when
// KernelCall changes, so that the record changes with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/kernel_call.h"

namespace ember::detail::emulated {

/// Asks this core for the cache line at `p` in a writable state: PREFETCHW, a hint that every
/// AMD x86-64 processor and Intel's since Broadwell implement. Written as asm because GCC's
/// __builtin_prefetch(p, 1) emits a read prefetch unless the target has PRFCHW, and a line
/// read into the shared state must still be taken from the core that holds it when written.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetchw %0" : : "m"(*static_cast<const std::byte*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

class LaunchRecord {
 public:
  LaunchRecord() = default;
  LaunchRecord(const LaunchRecord&) = delete;  // data_ may point into the record itself
  LaunchRecord& operator=(const LaunchRecord&) = delete;

  /// Host: replaces the record with `call`.
  void pack(const KernelCall& call);
  /// Worker: writes the record into `call`, lending it the payload (give_back returns it).
  void unpack(KernelCall& call);
  /// Worker: takes back the payload unpack lent `call`.
  void give_back(KernelCall& call) noexcept;
  /// Host: releases the payload (the entry is being recycled).
  void release() noexcept { payload_.reset(); }
  /// Host: asks this core for the record's first lines in a writable state, ahead of the
  /// next pack (Note [Emulated launch prefetch] in emulated_stream.cpp).
  void prefetch_for_write() const noexcept;

 private:
  std::byte* reserve(size_t bytes);

  static constexpr size_t kInlineBytes = 448;  // a binary op on 4-D operands
  std::byte* data_ = inline_;
  size_t capacity_ = kInlineBytes;
  std::unique_ptr<std::byte[]> heap_;  // when a launch did not fit inline: its buffer, kept
  KernelPayload payload_;
  alignas(16) std::byte inline_[kInlineBytes];
};

}  // namespace ember::detail::emulated
