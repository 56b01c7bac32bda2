// nn::DataParallel: scatter, replicate, parallel_apply, gather (PyTorch's DataParallel.forward).
#include "ember/nn/parallel/data_parallel.h"

#include "ember/cuda.h"
#include "ember/errors.h"
#include "parallel/comm.h"
#include "parallel/parallel_apply.h"
#include "parallel/replicate.h"
#include "runtime/context.h"

namespace ember::nn {

namespace parallel = ember::detail::parallel;

DataParallel::DataParallel(std::shared_ptr<Module> module, detail::nn::ReplicaFactory factory,
                           std::vector<int> device_ids, std::optional<int> output_device)
    : module_(std::move(module)), factory_(std::move(factory)) {
  EMBER_CHECK(module_ != nullptr, ValueError, "DataParallel: the module is null");
  register_module("module", module_);
  if (!cuda::is_available()) return;  // as PyTorch: no device type, the module is simply called
  if (device_ids.empty()) {
    for (int i = 0; i < cuda::device_count(); ++i) device_ids.push_back(i);
  }
  for (int id : device_ids) detail::check_device_index(id);
  const int output = output_device.value_or(device_ids[0]);
  if (output != -1) detail::check_device_index(output);
  if (device_ids.size() == 1) {
    module_->to(Device(kCUDA, device_ids[0]));
  } else {
    parallel::make_replica(*module_, factory_);  // a module whose replicas cannot match fails here
  }
  device_ids_ = std::move(device_ids);
  output_device_ = output;
}

Tensor DataParallel::forward(const Tensor& input) {
  if (device_ids_.empty()) return (*module_)(input);
  const Device source(kCUDA, device_ids_[0]);
  for (const std::vector<Tensor>& tensors : {module_->parameters(), module_->buffers()}) {
    for (const Tensor& t : tensors) {
      EMBER_CHECK(t.device() == source, DeviceError, "module must have its parameters and buffers on device ", source,
                  " (device_ids[0]) but found one of them on device: ", t.device());
    }
  }
  const std::vector<Tensor> inputs = parallel::scatter(input, device_ids_, 0);
  if (device_ids_.size() == 1) return (*module_)(inputs[0]);
  const std::vector<int> devices(device_ids_.begin(), device_ids_.begin() + static_cast<std::ptrdiff_t>(inputs.size()));
  const auto replicas = parallel::replicate(*module_, factory_, devices);
  return parallel::gather(parallel::parallel_apply(replicas, inputs, devices), output_device_, 0);
}

}  // namespace ember::nn
