// SanitizingBackend: the stream sanitizer as a decorator over the cuda backend.
//
// As RMM's statistics_resource_adaptor wraps a memory resource: final, a non-owning
// upstream, every hook forwarded. Around the forwarding it tells the RaceDetector what
// the call means for ordering (Note [Stream race detection]): launches and copies are
// accesses, checked before they are forwarded (a race in Error mode throws and the call
// never reaches the upstream); records, waits and synchronisations update the clocks.
// It knows nothing of how streams are made: a stream is its BackendStream pointer.
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/kernel_call.h"
#include "runtime/backend.h"
#include "sanitizer/race_detector.h"

namespace ember::detail::sanitizer {

/// The detector and mode shared by the decorator and the allocators' reports.
struct SanitizerState {
  std::mutex mutex;
  RaceDetector detector;                            // guarded by mutex
  std::unordered_map<uintptr_t, size_t> raw_sizes;  // raw_alloc/pinned_alloc through the decorator
};
SanitizerState& state();
/// Counts a race reported in Warn mode (cuda::sanitizer::warnings()).
void note_warning() noexcept;

class SanitizingBackend final : public Backend {
 public:
  explicit SanitizingBackend(Backend& upstream) : upstream_(upstream) {}
  Backend& upstream() const noexcept { return upstream_; }

  const char* name() const noexcept override { return upstream_.name(); }
  int device_count() const override { return upstream_.device_count(); }
  cuda::DeviceProperties properties(int device) const override { return upstream_.properties(device); }
  void set_device(int device) override { upstream_.set_device(device); }

  void* raw_alloc(int device, size_t bytes) override;
  void raw_free(int device, void* ptr) override;
  std::pair<size_t, size_t> mem_get_info(int device) override { return upstream_.mem_get_info(device); }
  std::string alloc_failure_reason(int device) override { return upstream_.alloc_failure_reason(device); }
  bool device_memory_is_host_addressable() const noexcept override {
    return upstream_.device_memory_is_host_addressable();
  }
  bool computes_reduced_floats_natively() const noexcept override {
    return upstream_.computes_reduced_floats_natively();
  }
  void* pinned_alloc(size_t bytes) override;
  void pinned_free(void* ptr) override;
  bool host_register(void* ptr, size_t bytes) override { return upstream_.host_register(ptr, bytes); }
  void host_unregister(void* ptr) override { upstream_.host_unregister(ptr); }
  bool supports_virtual_memory(int device) override { return upstream_.supports_virtual_memory(device); }
  void* reserve_address_range(int device, size_t bytes) override {
    return upstream_.reserve_address_range(device, bytes);
  }
  bool map_memory(int device, void* ptr, size_t bytes) override { return upstream_.map_memory(device, ptr, bytes); }
  void unmap_memory(int device, void* ptr, size_t bytes) override;
  void release_address_range(int device, void* ptr, size_t bytes) override {
    upstream_.release_address_range(device, ptr, bytes);
  }
  bool supports_stream_ordered_allocation(int device) override {
    return upstream_.supports_stream_ordered_allocation(device);
  }
  void* stream_alloc(int device, size_t bytes, BackendStream* stream) override {
    return upstream_.stream_alloc(device, bytes, stream);
  }
  void stream_free(int device, void* ptr, BackendStream* stream) override {
    upstream_.stream_free(device, ptr, stream);
  }
  PoolUsage pool_usage(int device) override { return upstream_.pool_usage(device); }
  void reset_pool_peaks(int device) override { upstream_.reset_pool_peaks(device); }
  void trim_pool(int device) override { upstream_.trim_pool(device); }

  BackendStream* default_stream(int device) override;
  BackendStream* create_stream(int device, int priority) override;
  void destroy_stream(BackendStream* stream) noexcept override;
  bool query(BackendStream* stream) override;
  void synchronize(BackendStream* stream) override;
  void synchronize_device(int device) override;
  std::pair<int, int> priority_range() const override { return upstream_.priority_range(); }

  BackendEvent* create_event(int device, bool enable_timing) override;
  void destroy_event(BackendEvent* event) noexcept override;
  void record(BackendEvent* event, BackendStream* stream) override;
  void wait(BackendStream* stream, BackendEvent* event) override;
  bool query(BackendEvent* event) override;
  void synchronize(BackendEvent* event) override;
  float elapsed_ms(BackendEvent* start, BackendEvent* end) override { return upstream_.elapsed_ms(start, end); }

  void launch(BackendStream* stream, const KernelCall& call) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned, BackendStream* stream) override;
  void launch_host_task(BackendStream* stream, HostTask&& task) override;
  void sleep(BackendStream* stream, std::chrono::nanoseconds duration) override { upstream_.sleep(stream, duration); }
  bool can_access_peer(int device, int peer) override { return upstream_.can_access_peer(device, peer); }
  void check_error(int device) override { upstream_.check_error(device); }
  void reset(int device) override;
  std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key, int device) override {
    return upstream_.create_fft_plan(key, device);
  }
  // Note [Sanitizing graph replays]: captured accesses are kept, not checked; each
  // replay of the graph is checked as all of them, on the replay stream.
  void begin_capture(BackendStream* stream, CaptureMode mode) override { upstream_.begin_capture(stream, mode); }
  BackendGraph* end_capture(BackendStream* stream) override;
  void launch_graph(BackendGraph* graph, BackendStream* stream) override;
  void destroy_graph(BackendGraph* graph) noexcept override;
  std::pair<CaptureStatus, uint64_t> capture_status(BackendStream* stream) noexcept override {
    return upstream_.capture_status(stream);
  }
  CaptureMode exchange_capture_mode(CaptureMode mode) noexcept override {
    return upstream_.exchange_capture_mode(mode);
  }
  bool any_capture_open() const noexcept override { return upstream_.any_capture_open(); }

 private:
  /// Checks the accesses (throwing or warning on a race), then records them.
  void access(BackendStream* stream, const std::vector<MemoryAccess>& accesses, const char* op, int device);

  Backend& upstream_;
  // Note [Sanitizing graph replays]
  struct CapturedAccesses {
    int device = -1;
    std::vector<MemoryAccess> accesses;
  };
  std::mutex graphs_mutex_;
  std::unordered_map<uint64_t, CapturedAccesses> captures_;     // by capture id; guarded
  std::unordered_map<BackendGraph*, CapturedAccesses> graphs_;  // guarded by graphs_mutex_
};

/// The bytes a strided operand touches: its span and footprint (Note [Access footprints]).
MemoryAccess access_of(const TensorArg& arg, AccessType type, const char* argument, int index);
/// access_of for each of `args`, numbered when there are several.
void add_operands(std::vector<MemoryAccess>& out, const OperandList& args, AccessType type, const char* argument);
/// Checks host accesses (Note [Host accesses]): throws DataRaceError or warns.
void check_host_accesses(const std::vector<MemoryAccess>& accesses, const char* op);

/// The report of `races` (PyTorch's wording); `upstream` names default streams.
std::string format_races(const std::vector<DataRace>& races, Backend& upstream);

}  // namespace ember::detail::sanitizer
