// EmulatedBackend's stream-ordered allocation hooks (backend:cudaMallocAsync) over each
// device's StreamOrderedPool (Note [Emulated stream-ordered pool]).
#include "backends/emulated/emulated_backend.h"
#include "ember/errors.h"

namespace ember::detail::emulated {

bool EmulatedBackend::supports_stream_ordered_allocation(int index) {
  device(index);  // validates the index
  return true;
}

void* EmulatedBackend::stream_alloc(int index, size_t bytes, BackendStream* native) {
  Device& dev = device(index);
  EmulatedStream& stream = cast(native);
  if (stream.capture() == nullptr) [[likely]]
    return dev.pool.allocate(bytes, native);
  // An allocation node (Note [Emulated graph memory]).
  void* ptr = dev.memory.allocate(bytes);
  if (ptr == nullptr) return nullptr;
  std::shared_ptr<void> memory(ptr, [&dev](void* p) { dev.memory.release(p); });
  if (!captures_.add_memory(stream, memory)) return dev.pool.allocate(bytes, native);  // the capture just ended
  std::lock_guard lock(graph_memory_mutex_);
  graph_memory_[ptr] = std::move(memory);
  return ptr;
}

void EmulatedBackend::stream_free(int index, void* ptr, BackendStream* native) {
  Device& dev = device(index);
  EmulatedStream& stream = cast(native);
  std::shared_ptr<void> graph_held;
  {
    std::lock_guard lock(graph_memory_mutex_);
    if (auto it = graph_memory_.find(ptr); it != graph_memory_.end()) {
      graph_held = std::move(it->second);
      graph_memory_.erase(it);
    }
  }
  if (graph_held != nullptr) {
    // Graph memory: the user's hold ends where the stream reaches the free; inside a
    // capture (a free node) the graph holds it anyway.
    if (stream.capture() == nullptr) launch_host_function(native, [held = std::move(graph_held)] {});
    return;
  }
  if (stream.capture() != nullptr) [[unlikely]]
    captures_.refuse(stream, "cudaFreeAsync in a capture of memory not allocated in a graph");
  StreamOrderedPool& pool = dev.pool;
  uint64_t generation = 0;
  EMBER_CHECK(pool.free(ptr, native, generation), CudaError, "CUDA error: invalid argument (cudaFreeAsync of ", ptr,
              ", which is not allocated from the pool of cuda:", index, ")");
  // The point other streams may reuse the block from: when this stream reaches it.
  launch_host_function(native, [&pool, ptr, generation] { pool.reached(ptr, generation); });
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
