// Running DataParallel's replicas on threads (PyTorch's parallel_apply).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ember/nn/module.h"
#include "ember/tensor.h"

namespace ember::detail::parallel {

/// replicas[i](inputs[i]) for every i, each on a thread of its own (in the calling thread
/// when there is one replica) with cuda device devices[i] current and, current on it, the
/// stream that is current on that device in the calling thread; grad mode as the caller's.
/// Returns the outputs in order once every replica has finished. An exception in replica
/// i is rethrown here, the first by replica order, with "Caught <Type> in replica <i> on
/// device <devices[i]>.\n" in front of its message (PyTorch's ExceptionWrapper), keeping
/// ember's and the standard types.
std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<ember::nn::Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<int>& devices);

/// The same for calls of any signature: run(i) for i < devices.size(), each under the
/// conditions above (threads, device, stream, grad mode, autocast), errors rethrown alike.
void parallel_run(const std::vector<int>& devices, const std::function<void(size_t)>& run);

}  // namespace ember::detail::parallel
