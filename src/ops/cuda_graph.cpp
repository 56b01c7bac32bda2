// CUDAGraph and the graph guard (torch.cuda.CUDAGraph, torch.cuda.graph).
//
// A graph ties three things to one capture, as PyTorch's CUDAGraph.cpp does: the
// backend's stream capture (Note [Emulated stream capture] on emulated devices), the
// caching allocator's private pool for the capture's allocations (Note [Graph private
// pools]), and the registered generator states' graph-safe Philox offsets (Note
// [Graph-safe Philox] and Note [Graph-safe generator states]). Each step undoes the
// earlier ones when it fails, so every error leaves the graph as it was and the allocator
// routing nothing to the pool.
#include "ember/cuda_graph.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/generator.h"
#include "ember/tensor.h"
#include "memory/memory.h"
#include "ops/graph_rng.h"
#include "runtime/backend.h"
#include "runtime/context.h"
#include "runtime/env.h"
#include "runtime/registry.h"
#include "runtime/stream_state.h"

namespace ember::cuda {
namespace {

std::atomic<uint64_t> next_graph_id{1};  // a graph's own pool is {id, 0}

detail::CaptureMode parse_mode(const std::string& mode) {
  if (mode == "global") return detail::CaptureMode::Global;
  if (mode == "thread_local") return detail::CaptureMode::ThreadLocal;
  if (mode == "relaxed") return detail::CaptureMode::Relaxed;
  detail::fail<ValueError>("Unknown capture_error_mode. Expected 'global', 'thread_local', or 'relaxed', got ", mode);
}

}  // namespace

MempoolId graph_pool_handle() { return detail::new_user_mempool_id(); }

bool is_current_stream_capturing() {
  detail::Backend* backend = detail::backend_or_null();
  if (backend == nullptr) return false;
  detail::StreamState* stream = detail::current_stream_state(detail::current_device_index());
  return backend->capture_status(stream->native()).first != detail::CaptureStatus::None;
}

struct CUDAGraph::Impl {
  const uint64_t id = next_graph_id.fetch_add(1);
  detail::BackendGraph* exec = nullptr;  // the instantiated graph, once captured
  bool capturing = false;
  int device = -1;
  std::optional<Stream> capture_stream;
  uint64_t capture_id = 0;
  MempoolId pool;
  // Note [Graph-safe Philox]: the states registered by register_generator_state, and the
  // last capture's states (those and the default generator's) with what replays write for
  // the captured random ops drawing from each and how far each replay advances it.
  struct RngSlot {
    std::shared_ptr<detail::GeneratorState> state;
    Tensor seed_extragraph, offset_extragraph;
  };
  std::vector<std::shared_ptr<detail::GeneratorState>> registered_states;
  std::vector<RngSlot> rng_slots;
  std::vector<uint64_t> wholegraph_increments;  // per slot; all 0 until a capture ends
  // The streams replays filled the slots' tensors on, recorded on them once each: freed with the graph,
  // their memory waits for the replays still queued there (as record_stream does).
  // Guarded: two threads may replay one graph (on streams ordered with each other: the
  // replays share the graph's memory, so unordered ones race on the device, as in CUDA).
  std::mutex replay_mutex;
  std::vector<Stream> replay_streams;
};

CUDAGraph::CUDAGraph() : impl_(std::make_unique<Impl>()) {}

namespace {

// The slots of a capture on `device`: the registered states and the default generator's
// (PyTorch registers it by every capture_begin), each once. Their tensors are made before
// the capture, from the device's own pool: replays write them eagerly. Left unwritten (no
// kernel on the capture stream): each replay fills them on its own stream before its graph
// reads them, so it need not be ordered after this stream. A state of the last capture
// keeps its tensors if on this device; any new one forgets the recorded replay streams
// (the old tensors go with their records, the new ones are recorded by the next replays).
std::vector<CUDAGraph::Impl::RngSlot> rng_slots_for_capture(CUDAGraph::Impl& g, int device) {
  std::vector<std::shared_ptr<detail::GeneratorState>> states = g.registered_states;
  std::shared_ptr<detail::GeneratorState> fallback = detail::default_generator_state(device);
  if (std::find(states.begin(), states.end(), fallback) == states.end()) states.push_back(std::move(fallback));
  std::vector<CUDAGraph::Impl::RngSlot> slots;
  bool made = false;
  for (std::shared_ptr<detail::GeneratorState>& state : states) {
    auto old = std::find_if(g.rng_slots.begin(), g.rng_slots.end(), [&](const CUDAGraph::Impl::RngSlot& slot) {
      return slot.state == state && slot.seed_extragraph.device().index() == device;
    });
    if (old != g.rng_slots.end()) {
      slots.push_back(*old);
      continue;
    }
    auto options = TensorOptions().dtype(kInt64).device(Device(kCUDA, device));
    slots.push_back({std::move(state), empty({1}, options), empty({1}, options)});
    made = true;
  }
  if (made) g.replay_streams.clear();
  return slots;
}

// Ends the open capture of `g` (whatever the current stream): the backend's capture
// first, then the generator and the pool routing. A failed end that left the capture
// open (cudaStreamEndCapture from a thread that did not begin it) changes nothing; one
// that ended it ends the rest too, and the pool's use goes.
void finish_capture(CUDAGraph::Impl& g) {
  detail::Backend& backend = detail::backend();
  detail::BackendStream* native = g.capture_stream->state()->native();
  detail::BackendGraph* exec = nullptr;
  try {
    exec = backend.end_capture(native);
  } catch (...) {
    auto [status, id] = backend.capture_status(native);
    if (status != detail::CaptureStatus::None && id == g.capture_id) throw;  // still open
    g.capturing = false;
    detail::open_capture_counter(g.device).fetch_sub(1, std::memory_order_acq_rel);
    detail::rng_capture_epilogue(g.capture_id, {});
    detail::end_allocate_to_pool(g.device, g.pool);
    detail::release_pool(g.device, g.pool);
    g.capture_stream.reset();
    throw;
  }
  g.capturing = false;
  detail::open_capture_counter(g.device).fetch_sub(1, std::memory_order_acq_rel);
  detail::rng_capture_epilogue(g.capture_id, g.wholegraph_increments);
  detail::end_allocate_to_pool(g.device, g.pool);
  g.exec = exec;
}

}  // namespace

CUDAGraph::~CUDAGraph() {
  try {
    if (impl_->capturing) finish_capture(*impl_);
  } catch (...) {
    // A capture abandoned with its graph: ended, and what it recorded dropped.
  }
  reset();
}

void CUDAGraph::capture_begin(MempoolId pool, const std::string& capture_error_mode) {
  Impl& g = *impl_;
  EMBER_CHECK(g.exec == nullptr && !g.capturing, CudaError,
              "This CUDAGraph instance already owns a captured graph. To capture a new graph, create a new instance.");
  const detail::CaptureMode mode = parse_mode(capture_error_mode);
  const int device = detail::current_device_index();
  Stream stream = current_stream(device);
  EMBER_CHECK(!stream.is_default(), CudaError,
              "CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to replay "
              "them on the default stream.)");
  detail::Backend& backend = detail::backend();
  detail::BackendStream* native = stream.state()->native();
  EMBER_CHECK(backend.capture_status(native).first == detail::CaptureStatus::None, CudaError,
              "CUDA error: operation not permitted when stream is capturing (capture_begin on a stream that is "
              "already capturing)");
  std::vector<Impl::RngSlot> slots = rng_slots_for_capture(g, device);
  std::vector<detail::RngCaptureSlot> capture_slots;
  for (const Impl::RngSlot& slot : slots)
    capture_slots.push_back(
        {slot.state, slot.seed_extragraph.data_ptr<int64_t>(), slot.offset_extragraph.data_ptr<int64_t>()});
  std::vector<uint64_t> increments(slots.size(), 0);
  const MempoolId pool_id = pool.empty() ? MempoolId{g.id, 0} : pool;

  backend.begin_capture(native, mode);
  detail::open_capture_counter(device).fetch_add(1, std::memory_order_acq_rel);
  const uint64_t capture_id = backend.capture_status(native).second;
  bool routed = false;
  try {
    detail::begin_allocate_to_pool(device, pool_id, capture_id);
    routed = true;
    detail::rng_capture_prologue(device, capture_id, capture_slots);
  } catch (...) {
    // Nothing of the capture may outlive the failure: a backend left capturing refuses
    // every later synchronization of the process.
    if (routed) {
      detail::end_allocate_to_pool(device, pool_id);
      detail::release_pool(device, pool_id);
    }
    try {
      backend.destroy_graph(backend.end_capture(native));
    } catch (...) {
      // Ended all the same (the failure was the capture's, not the end's).
    }
    detail::open_capture_counter(device).fetch_sub(1, std::memory_order_acq_rel);
    throw;
  }
  g.rng_slots = std::move(slots);
  g.wholegraph_increments = std::move(increments);
  g.capturing = true;
  g.device = device;
  g.capture_stream = stream;
  g.capture_id = capture_id;
  g.pool = pool_id;
}

void CUDAGraph::capture_end() {
  Impl& g = *impl_;
  EMBER_CHECK(g.capturing, CudaError, "Capture must end on the same stream it began on.");
  if (detail::current_device_index() != g.device || current_stream(g.device) != *g.capture_stream) {
    // Ended and discarded all the same: a capture left open (a Global one refuses every
    // synchronization of the process) would outlive the error that reports it.
    try {
      finish_capture(g);
    } catch (...) {
      // Still open only if this thread may not end it (finish_capture's contract).
    }
    reset();
    detail::fail<CudaError>(
        "Capture must end on the same stream it began on. (The capture was ended and its "
        "graph discarded.)");
  }
  finish_capture(g);
}

void CUDAGraph::replay() {
  Impl& g = *impl_;
  EMBER_CHECK(g.exec != nullptr, CudaError, "Called CUDAGraph::replay without a preceding successful capture.");
  DeviceGuard guard(g.device);
  if (std::any_of(g.wholegraph_increments.begin(), g.wholegraph_increments.end(), [](uint64_t i) { return i > 0; })) {
    Stream stream = current_stream(g.device);
    // Captured, the fills below would write this moment's seed and offset on every
    // replay of the outer graph: all of them would draw the same numbers.
    EMBER_CHECK(detail::backend().capture_status(stream.state()->native()).first == detail::CaptureStatus::None,
                CudaError,
                "CUDAGraph::replay of a graph with random ops inside another capture is not supported "
                "(every replay of the outer graph would draw the same random numbers)");
    {
      std::lock_guard lock(g.replay_mutex);
      if (std::find(g.replay_streams.begin(), g.replay_streams.end(), stream) == g.replay_streams.end()) {
        for (Impl::RngSlot& slot : g.rng_slots) {
          slot.seed_extragraph.record_stream(stream);
          slot.offset_extragraph.record_stream(stream);
        }
        g.replay_streams.push_back(stream);
      }
    }
    for (size_t i = 0; i < g.rng_slots.size(); ++i) {
      if (g.wholegraph_increments[i] == 0) continue;
      Impl::RngSlot& slot = g.rng_slots[i];
      auto [seed, offset] = detail::rng_replay_prologue(*slot.state, g.wholegraph_increments[i]);
      slot.seed_extragraph.fill_(static_cast<int64_t>(seed));
      slot.offset_extragraph.fill_(static_cast<int64_t>(offset));
    }
  }
  detail::backend().launch_graph(g.exec, detail::current_stream_state(g.device)->native());
}

void CUDAGraph::reset() {
  Impl& g = *impl_;
  if (g.capturing) return;  // an open capture is ended by capture_end (or the destructor)
  if (g.exec != nullptr) {
    detail::release_pool(g.device, g.pool);
    detail::backend().destroy_graph(std::exchange(g.exec, nullptr));
  }
  g.capture_stream.reset();
  std::fill(g.wholegraph_increments.begin(), g.wholegraph_increments.end(), 0);
}

void CUDAGraph::register_generator_state(const Generator& generator) {
  EMBER_CHECK(generator.device().is_cuda(), DeviceError,
              "Expected a 'cuda' device type for generator but found 'cpu' (register_generator_state)");
  register_generator_state(detail::generator_state(generator));
}

void CUDAGraph::register_generator_state(std::shared_ptr<detail::GeneratorState> state) {
  Impl& g = *impl_;
  EMBER_CHECK(state != nullptr, ValueError, "register_generator_state: the generator state is null");
  EMBER_CHECK(detail::generator_state_device(*state).is_cuda(), DeviceError,
              "Expected a 'cuda' device type for generator but found 'cpu' (register_generator_state)");
  // PyTorch's assertNotCapturing; also refused while this graph captures on another thread's
  // stream: the capture began without the state.
  EMBER_CHECK(!is_current_stream_capturing() && !g.capturing, CudaError,
              "Cannot register the state during capturing stage. during CUDA graph capture. If you need this call "
              "to be captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive");
  if (std::find(g.registered_states.begin(), g.registered_states.end(), state) == g.registered_states.end())
    g.registered_states.push_back(std::move(state));
}

MempoolId CUDAGraph::pool() const {
  EMBER_CHECK(impl_->exec != nullptr, CudaError, "Called CUDAGraph::pool() without a preceding successful capture.");
  return impl_->pool;
}

// ---- the guard ------------------------------------------------------------------------------

namespace {

// torch.cuda.graph's default_capture_stream, but one per device: PyTorch's one stream for
// all devices made a guard under another device capture nothing (its stream made the first
// device current, so that device's work ran eagerly; pytorch#87894). Made on first use on
// each device, and made again after a reset of the device has invalidated it.
Stream default_capture_stream(int device) {
  static std::mutex mutex;
  static std::array<std::optional<Stream>, detail::kMaxDevices> streams;  // NOLINT: as the class attribute
  std::lock_guard lock(mutex);
  std::optional<Stream>& stream = streams[static_cast<size_t>(device)];
  if (!stream || stream->state()->generation() != detail::device_generation(device)) stream.emplace(device);
  return *stream;
}

}  // namespace

graph::graph(CUDAGraph& cuda_graph, MempoolId pool, std::optional<Stream> stream, const std::string& capture_error_mode)
    : graph_(cuda_graph), uncaught_(std::uncaught_exceptions()), previous_device_(current_device()) {
  Stream capture_stream = stream ? *stream : default_capture_stream(current_device());
  synchronize();
  empty_cache();
  previous_stream_ = current_stream(capture_stream.device_index());
  set_stream(capture_stream);  // also makes its device current
  try {
    graph_.capture_begin(pool, capture_error_mode);
  } catch (...) {
    restore();
    throw;
  }
}

void graph::restore() noexcept {
  try {
    set_stream(*previous_stream_);
    set_device(previous_device_);
  } catch (...) {
    // The device was reset meanwhile: its streams are gone, nothing to restore.
  }
}

graph::~graph() noexcept(false) {
  const bool unwinding = std::uncaught_exceptions() > uncaught_;
  try {
    graph_.capture_end();
  } catch (...) {
    restore();
    if (!unwinding) throw;
    return;
  }
  restore();
}

}  // namespace ember::cuda
