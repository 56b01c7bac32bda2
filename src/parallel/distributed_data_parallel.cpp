// nn::parallel::DistributedDataParallel: construction (checks, state broadcast, buckets)
// and forward(); the gradient averaging is the Reducer's (src/parallel/reducer.h).
#include <cmath>

#include "ember/autograd.h"
#include "ember/distributed.h"
#include "ember/errors.h"
#include "ember/nn/parallel/distributed.h"
#include "parallel/module_sync.h"
#include "parallel/reducer.h"

namespace ember::nn::parallel {

namespace dist = ember::distributed;

namespace {

// The module's devices: one cuda device, or the cpu (PyTorch's DDP rejects a mix).
Device module_device(const std::vector<Tensor>& params, const DDPOptions& options) {
  const Device device = params.front().device();
  for (const Tensor& p : params) {
    EMBER_CHECK(p.device().type() == device.type(), ValueError,
                "DistributedDataParallel's input module must be on the same type of devices, but input module "
                "parameters locate in ",
                device, " and ", p.device(), ".");
    EMBER_CHECK(p.device() == device, ValueError,
                "DistributedDataParallel: every parameter must be on one device (found ", device, " and ", p.device(),
                "); use one process per device");
  }
  const auto& ids = options.device_ids();
  EMBER_CHECK(ids.size() <= 1, ValueError, "device_ids can only be None or contain a single element.");
  if (!ids.empty()) {
    EMBER_CHECK(device.is_cuda(), ValueError,
                "DistributedDataParallel device_ids and output_device arguments only work with single-device/"
                "multiple-device GPU modules or CPU modules, but got device_ids [",
                ids.front(), "], output_device None, and module parameters {", device, "}.");
    EMBER_CHECK(device.index() == ids.front(), ValueError, "DistributedDataParallel: device_ids [", ids.front(),
                "] names another device than the module's parameters, which are on ", device);
  }
  return device;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : Module("DistributedDataParallel"), module_(std::move(module)), options_(std::move(options)) {
  EMBER_CHECK(module_ != nullptr, ValueError, "DistributedDataParallel: the module is null");
  EMBER_CHECK(options_.bucket_cap_mb() >= 0 && std::isfinite(options_.bucket_cap_mb()), ValueError,
              "DistributedDataParallel: bucket_cap_mb must be a non-negative number, got ", options_.bucket_cap_mb());
  dist::get_world_size();  // the default process group must exist
  std::vector<Tensor> all_params = module_->parameters();
  std::vector<Tensor> params;  // those the reducer averages
  std::vector<std::string> names;
  for (const auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    params.push_back(p);
    names.push_back(name);
  }
  EMBER_CHECK(!params.empty(), ValueError,
              "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
              "gradient.");
  module_device(params, options_);
  buffers_ = module_->buffers();

  detail::verify_params_across_processes(params, names);
  std::vector<Tensor> states = all_params;
  // Buffers only with broadcast_buffers, as PyTorch 2.1+'s _sync_module_states (1.13 sent them always).
  if (options_.broadcast_buffers()) states.insert(states.end(), buffers_.begin(), buffers_.end());
  detail::broadcast_coalesced(states, /*src=*/0);

  const auto cap = static_cast<size_t>(options_.bucket_cap_mb() * 1024 * 1024);
  auto buckets = detail::compute_bucket_assignment_by_size(params, {detail::kDefaultFirstBucketBytes, cap});
  reducer_ = detail::Reducer::make(params, names, std::move(buckets), options_.find_unused_parameters(),
                                   options_.gradient_as_bucket_view());
  register_module("module", module_);
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::before_forward() {
  if (is_grad_enabled()) reducer_->ensure_prior_reduction_finished();
  if (require_forward_param_sync_ && options_.broadcast_buffers() && !buffers_.empty()) sync_buffers();
}

void DistributedDataParallel::after_forward(const std::vector<Tensor>& outputs) {
  if (is_grad_enabled() && require_backward_grad_sync_) {
    require_forward_param_sync_ = true;
    reducer_->prepare_for_backward(options_.find_unused_parameters() ? outputs : std::vector<Tensor>{});
  } else {
    require_forward_param_sync_ = false;
  }
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  before_forward();
  Tensor x = input;
  if (!options_.device_ids().empty() && x.defined()) x = x.to(Device(kCUDA, options_.device_ids().front()));
  Tensor output = module_->forward(x);
  after_forward({output});
  return output;
}

std::vector<Tensor> DistributedDataParallel::forward_with(const std::function<std::vector<Tensor>()>& forward) {
  EMBER_CHECK(static_cast<bool>(forward), ValueError,
              "DistributedDataParallel::forward_with: the forward function is empty");
  before_forward();
  std::vector<Tensor> outputs = forward();
  after_forward(outputs);
  return outputs;
}

void DistributedDataParallel::sync_buffers() { detail::broadcast_coalesced(buffers_, /*src=*/0); }

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_indices() const {
  // The reducer indexes the parameters that require grad; map back to parameters().
  std::vector<Tensor> all = module_->parameters();
  std::vector<size_t> position;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].requires_grad()) position.push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  for (const auto& bucket : reducer_->bucket_indices()) {
    out.emplace_back();
    for (size_t index : bucket) out.back().push_back(position[index]);
  }
  return out;
}

}  // namespace ember::nn::parallel
