// nn::DataParallel: scatter, replicate, parallel_apply, gather (PyTorch's DataParallel.forward).
#include "ember/nn/parallel/data_parallel.h"

#include <algorithm>

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

void DataParallel::check_module_on_source() const {
  const Device source(kCUDA, device_ids_[0]);
  for (const std::vector<Tensor>& tensors : {module_->parameters(), module_->buffers()}) {
    for (const Tensor& t : tensors) {
      EMBER_CHECK(t.device() == source, DeviceError, "module must have its parameters and buffers on device ", source,
                  " (device_ids[0]) but found one of them on device: ", t.device());
    }
  }
}

Tensor DataParallel::forward(const Tensor& input) {
  if (device_ids_.empty()) return (*module_)(input);
  check_module_on_source();
  const std::vector<Tensor> inputs = parallel::scatter(input, device_ids_, 0);
  if (device_ids_.size() == 1) return (*module_)(inputs[0]);
  const std::vector<int> devices(device_ids_.begin(), device_ids_.begin() + static_cast<std::ptrdiff_t>(inputs.size()));
  const auto replicas = parallel::replicate(*module_, factory_, devices);
  return parallel::gather(parallel::parallel_apply(replicas, inputs, devices), output_device_, 0);
}

std::vector<Tensor> DataParallel::forward_with(const std::vector<Tensor>& inputs, const ReplicaForward& forward,
                                               int64_t dim) {
  EMBER_CHECK(static_cast<bool>(forward), ValueError, "DataParallel::forward_with: the forward function is empty");
  if (device_ids_.empty()) return forward(*module_, inputs);
  check_module_on_source();
  if (device_ids_.size() == 1) {
    const Device device(kCUDA, device_ids_[0]);
    std::vector<Tensor> moved;
    for (const Tensor& t : inputs) moved.push_back(t.defined() ? t.to(device) : t);
    return forward(*module_, moved);
  }
  // chunks[i][k]: input k's chunk for replica i.
  size_t n = device_ids_.size();
  std::vector<std::vector<Tensor>> scattered;
  for (const Tensor& t : inputs) {
    scattered.push_back(parallel::scatter(t, device_ids_, dim));
    n = std::min(n, scattered.back().size());
  }
  std::vector<std::vector<Tensor>> chunks(n);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& parts : scattered) chunks[i].push_back(parts[i]);
  }
  const std::vector<int> devices(device_ids_.begin(), device_ids_.begin() + static_cast<std::ptrdiff_t>(n));
  const auto replicas = parallel::replicate(*module_, factory_, devices);
  std::vector<std::vector<Tensor>> outputs(n);
  parallel::parallel_run(devices, [&](size_t i) { outputs[i] = forward(*replicas[i], chunks[i]); });
  std::vector<Tensor> gathered;
  for (size_t j = 0; j < outputs[0].size(); ++j) {
    std::vector<Tensor> parts;
    for (size_t i = 0; i < n; ++i) {
      EMBER_CHECK(outputs[i].size() == outputs[0].size(), ValueError, "DataParallel::forward_with: replica ", i,
                  " returned ", outputs[i].size(), " tensors and replica 0 ", outputs[0].size());
      parts.push_back(outputs[i][j]);
    }
    gathered.push_back(parallel::gather(parts, output_device_, dim));
  }
  return gathered;
}

}  // namespace ember::nn
