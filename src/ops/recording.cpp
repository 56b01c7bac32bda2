// The installed Recorder (Note [Recording ops] in recording.h).
#include "ops/recording.h"

#include <atomic>

namespace ember::detail {

namespace {

// Before autograd installs itself (static initialisation of another file), nothing requires
// grad, so there is nothing to record.
class NullRecorder final : public Recorder {
 public:
  void record(Formula, const std::vector<Tensor>&, std::vector<Tensor*>, Attrs, bool,
              const std::vector<uint32_t>&) override {}
  void note_view(const Tensor&, const Tensor&, bool) override {}
  void check_inplace(const Tensor&, const Tensor&) override {}
  void record_inplace(Formula, const Tensor&, const Tensor&, Tensor&, Attrs, std::vector<uint32_t>) override {}
};

constinit NullRecorder g_null;
constinit std::atomic<Recorder*> g_recorder{&g_null};

}  // namespace

void install_recorder(Recorder* recorder) noexcept { g_recorder.store(recorder, std::memory_order_release); }

Recorder& recorder() noexcept { return *g_recorder.load(std::memory_order_acquire); }

}  // namespace ember::detail
