// EmulatedBackend's stream-ordered allocation hooks (backend:cudaMallocAsync) over each
// device's StreamOrderedPool (Note [Emulated stream-ordered pool]).
#include "backends/emulated/emulated_backend.h"
#include "ember/errors.h"

namespace ember::detail::emulated {

bool EmulatedBackend::supports_stream_ordered_allocation(int index) {
  device(index);  // validates the index
  return true;
}

void* EmulatedBackend::stream_alloc(int index, size_t bytes, BackendStream* stream) {
  return device(index).pool.allocate(bytes, stream);
}

void EmulatedBackend::stream_free(int index, void* ptr, BackendStream* stream) {
  StreamOrderedPool& pool = device(index).pool;
  uint64_t generation = 0;
  EMBER_CHECK(pool.free(ptr, stream, generation), CudaError, "CUDA error: invalid argument (cudaFreeAsync of ", ptr,
              ", which is not allocated from the pool of cuda:", index, ")");
  // The point other streams may reuse the block from: when this stream reaches it.
  launch_host_function(stream, [&pool, ptr, generation] { pool.reached(ptr, generation); });
}

Backend::PoolUsage EmulatedBackend::pool_usage(int index) { return device(index).pool.usage(); }

void EmulatedBackend::reset_pool_peaks(int index) { device(index).pool.reset_peaks(); }

void EmulatedBackend::trim_pool(int index) {
  StreamOrderedPool& pool = device(index).pool;
  const uint64_t passed = pool.frees();  // frees from other threads meanwhile are not waited for
  synchronize_device(index);             // each of these has been reached, its marker run or skipped
  pool.trim(passed);
}

}  // namespace ember::detail::emulated
