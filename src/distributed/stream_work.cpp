#include "distributed/stream_work.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "ember/errors.h"
#include "kernels/host_task.h"
#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::detail::distributed {
namespace {

enum : int { kPending, kRan, kSkipped };

/// Whether the task ran. The waiting thread polls it briefly (a collective on a world of
/// one, or a small one, is done in microseconds, as the stream workers poll for work),
/// then blocks on it (an atomic wait, no lock).
struct Outcome {
  static constexpr std::chrono::microseconds kSpin{50};
  std::atomic<int> state{kPending};
  void set(int s) noexcept {
    state.store(s, std::memory_order_release);
    state.notify_all();
  }
  int wait() const noexcept {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    while (state.load(std::memory_order_acquire) == kPending && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    int s;
    while ((s = state.load(std::memory_order_acquire)) == kPending) state.wait(kPending, std::memory_order_acquire);
    return s;
  }
};

/// Owned by the task's body: a body dropped unrun (a failed device's stream skips its
/// work, or the launch threw) marks the outcome skipped as it goes.
struct SkipMark {
  std::shared_ptr<Outcome> outcome;
  ~SkipMark() {
    if (outcome->state.load(std::memory_order_acquire) == kPending) outcome->set(kSkipped);
  }
};

}  // namespace

void run_on_stream(const cuda::Stream& stream, const char* name, int device, OperandList writes, OperandList reads,
                   const std::function<void()>& body, cuda::Event& end) {
  auto outcome = std::make_shared<Outcome>();
  std::exception_ptr launch_error;
  try {
    HostTask task;  // dies inside the try: a launch that threw has dropped the body by the wait
    task.name = name;
    task.device = device;
    task.outputs = std::move(writes);
    task.inputs = std::move(reads);
    auto mark = std::make_shared<SkipMark>();
    mark->outcome = outcome;
    task.body = [outcome, mark = std::move(mark), &body] {
      body();
      outcome->set(kRan);
    };
    backend().launch_host_task(stream.state()->native(), std::move(task));
    end.record(stream);  // queued while the task runs: the stream passes it right after
  } catch (...) {
    launch_error = std::current_exception();
  }
  if (outcome->wait() == kRan) {
    // Unseen by the sanitizer (see the declaration); a recorded end that cannot be waited
    // for (a launch that threw after running the task) is left to the caller's streams.
    // A device that failed meanwhile (another stream's kernel) raises here: the task ran,
    // so the error is left for the next synchronizing call, as CUDA leaves it.
    // Relaxed: a graph may be capturing meanwhile on another thread (a DDP step captured
    // after eager warm-up steps whose collectives are finishing here), and this event is
    // none of its work (as the collective watchdog's queries).
    try {
      CaptureModeGuard relaxed(undecorated_backend(), CaptureMode::Relaxed);
      if (end.is_recorded() && !launch_error) undecorated_backend().synchronize(end.state()->native());
    } catch (const std::exception&) {
    }
    return;
  }
  if (launch_error) std::rethrow_exception(launch_error);
  backend().check_error(device);  // the stream skipped it: the device's sticky error
  fail<CudaError>(name, ": the stream skipped the collective's work");
}

}  // namespace ember::detail::distributed
