// Replicas on threads, each on its device's stream; errors carried back to the caller.
#include "parallel/parallel_apply.h"

#include <exception>
#include <string>
#include <thread>

#include "data/worker_error.h"
#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ops/autocast.h"

namespace ember::detail::parallel {

void parallel_run(const std::vector<int>& devices, const std::function<void(size_t)>& call) {
  const size_t n = devices.size();
  // Read in the calling thread: current streams are thread-local.
  std::vector<cuda::Stream> streams;
  streams.reserve(n);
  for (int d : devices) streams.push_back(cuda::current_stream(d));
  const bool grad_enabled = is_grad_enabled();
  const detail::AutocastState autocast = detail::autocast_state();

  std::vector<std::exception_ptr> errors(n);
  auto run = [&](size_t i) {
    try {
      AutoGradMode grad_mode(grad_enabled);
      const detail::AutocastPropagate autocast_mode(autocast);  // the caller's autocast
      cuda::StreamGuard stream(streams[i]);                     // also makes devices[i] current
      call(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (n == 1) {
    run(0);
  } else {
    std::vector<std::jthread> threads;  // joined on scope exit, also if starting one fails
    threads.reserve(n);
    for (size_t i = 0; i < n; ++i) threads.emplace_back(run, i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) {
      data::detail::rethrow_caught(errors[i],
                                   "in replica " + std::to_string(i) + " on device " + std::to_string(devices[i]));
    }
  }
}

std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<ember::nn::Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<int>& devices) {
  const size_t n = replicas.size();
  EMBER_CHECK(inputs.size() == n && devices.size() == n, ValueError, "parallel_apply: ", n, " replicas, ",
              inputs.size(), " inputs and ", devices.size(), " devices");
  std::vector<Tensor> outputs(n);
  parallel_run(devices, [&](size_t i) { outputs[i] = (*replicas[i])(inputs[i]); });
  return outputs;
}

}  // namespace ember::detail::parallel
