// Host cost of the runtime's hot paths on emulated devices: enqueueing a small op, an
// event round trip, creating and dropping a stream, and the current-stream lookup every
// op does.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "backends/emulated/emulated_backend.h"
#include "ember/cuda.h"
#include "kernels/kernel_call.h"
#include "runtime/context.h"

namespace cuda = ember::cuda;
using ember::detail::emulated::EmulatedBackend;

namespace {

const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(2, size_t{1} << 30);
  return true;
}();

EmulatedBackend& emulated() { return dynamic_cast<EmulatedBackend&>(ember::detail::undecorated_backend()); }

// Queue an empty host function: the per-item cost of the stream FIFO itself.
void BM_EnqueueEmptyItem(benchmark::State& state) {
  cuda::Stream s;
  auto* native = s.state()->native();
  int64_t n = 0;
  for (auto _ : state) {
    emulated().launch_host_function(native, [] {});
    if (++n % 4096 == 0) s.synchronize();  // keep the queue bounded
  }
  s.synchronize();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EnqueueEmptyItem);

// Queue a tiny KernelCall (one-element Fill), as an op launch does after its checks.
void BM_EnqueueTinyKernel(benchmark::State& state) {
  cuda::Stream s;
  auto* native = s.state()->native();
  float value = 0;
  ember::detail::KernelCall call;
  call.op = ember::detail::OpKind::Fill;
  call.device = 0;
  call.args = ember::detail::kargs::Value{1.0};
  call.outputs = {{&value, ember::kFloat32, {1}, {1}}};
  int64_t n = 0;
  for (auto _ : state) {
    emulated().launch(native, call);
    if (++n % 4096 == 0) s.synchronize();
  }
  s.synchronize();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EnqueueTinyKernel);

// record + synchronize on an idle stream: the worker must wake, run the record, and
// wake the host.
void BM_EventRoundTrip(benchmark::State& state) {
  cuda::Stream s;
  cuda::Event e;
  for (auto _ : state) {
    e.record(s);
    e.synchronize();
  }
}
BENCHMARK(BM_EventRoundTrip);

void BM_StreamQueryIdle(benchmark::State& state) {
  cuda::Stream s;
  for (auto _ : state) benchmark::DoNotOptimize(s.query());
}
BENCHMARK(BM_StreamQueryIdle);

// Creating a stream and dropping its only handle (torch.cuda.Stream() in a loop).
void BM_StreamCreateDestroy(benchmark::State& state) {
  for (auto _ : state) {
    cuda::Stream s(0);
    benchmark::DoNotOptimize(s.id());
  }
}
BENCHMARK(BM_StreamCreateDestroy);

void BM_CurrentStreamState(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ember::detail::current_stream_state(0));
}
BENCHMARK(BM_CurrentStreamState);

}  // namespace

BENCHMARK_MAIN();
