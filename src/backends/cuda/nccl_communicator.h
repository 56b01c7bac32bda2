// NCCL communicators for the "nccl" process group (src/distributed/process_group_nccl.cpp),
// in ember's own terms: the distributed layer reaches CUDA and NCCL through this header and
// nothing else of the backends (scripts/check-layers), so it names no NCCL or CUDA type.
// The driver backend implements it (nccl_communicator.cpp, linked with NCCL); a build
// without CUDA links backends/no_cuda/nccl_stub.cpp, whose entries throw DistributedError.
// NCCL's failures are DistributedError "NCCL error in <collective>: <NCCL's reason>".
#pragma once

#include <array>
#include <atomic>
#include <cstddef>

#include "ember/dtype.h"

namespace ember::detail {
class BackendStream;  // runtime/backend.h
}  // namespace ember::detail

namespace ember::detail::nccl {

/// Throws DistributedError when ember was built without NCCL (no CUDA driver backend).
void require_built();

/// An ncclUniqueId's bytes: rank 0 makes one, the others receive it through the store.
using UniqueId = std::array<char, 128>;
UniqueId make_unique_id();

/// NCCL's reductions (ncclRedOp_t).
enum class Reduction { Sum, Avg, Product, Min, Max };

/// Throws TypeError "<collective>: the nccl backend does not support <dtype> tensors" for a
/// dtype NCCL cannot carry (complex travels as pairs of reals, bool as uint8).
void check_dtype(DType dtype, const char* collective);

/// One rank's communicator (ncclComm_t) on one device. Each call makes that device current
/// for its duration; the collectives enqueue on `stream`, a driver backend stream of that
/// device, and take counts in elements of `dtype`.
class Communicator {
 public:
  /// ncclCommInitRank: blocks until every rank of the world has called it.
  Communicator(const UniqueId& id, int world_size, int rank, int device);
  /// ncclCommDestroy, unless abort() ran.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// ncclCommAbort, from any thread (the caller keeps it apart from enqueueing): kernels
  /// stuck in a collective return and the communicator is gone; nothing may be enqueued after.
  void abort() noexcept;

  void all_reduce(void* data, size_t count, DType dtype, Reduction op, BackendStream* stream, const char* collective);
  void broadcast(const void* send, void* receive, size_t count, DType dtype, int root, BackendStream* stream,
                 const char* collective);
  /// `receive` is read only on `root`.
  void reduce(const void* send, void* receive, size_t count, DType dtype, Reduction op, int root, BackendStream* stream,
              const char* collective);
  /// ncclGroupStart / ncclGroupEnd: the collectives enqueued between them run as one.
  void group_start(const char* collective);
  void group_end(const char* collective);

 private:
  void* comm_ = nullptr;  // the ncclComm_t
  int device_;
  std::atomic<bool> aborted_{false};
};

}  // namespace ember::detail::nccl
