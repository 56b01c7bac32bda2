// nn::parallel::DistributedDataParallel: data parallelism across processes, one model
// replica per rank, gradients averaged during backward (PyTorch's DDP). See
// src/nn/parallel/reducer.h for how buckets, hooks and streams work together.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/nn/module.h"
#include "ember/tensor.h"

namespace ember::nn::parallel {

namespace detail {
class Reducer;
}

/// DistributedDataParallel settings; each setter modifies in place and returns *this.
class DDPOptions {
 public:
  /// The one cuda device the module lives on (empty: the module's own device, and the only
  /// choice for cpu modules). Inputs are moved to it in forward().
  DDPOptions& device_ids(std::vector<int> v) {
    device_ids_ = std::move(v);
    return *this;
  }
  /// The size cap of every bucket but the first (which holds 1 MiB), in MiB.
  DDPOptions& bucket_cap_mb(double v) {
    bucket_cap_mb_ = v;
    return *this;
  }
  /// Traverse the autograd graph from forward()'s output to find the parameters that will
  /// get no gradient, and reduce their buckets without them.
  DDPOptions& find_unused_parameters(bool v) {
    find_unused_parameters_ = v;
    return *this;
  }
  /// Gradients become views into the buckets (no copy back after the all-reduce).
  DDPOptions& gradient_as_bucket_view(bool v) {
    gradient_as_bucket_view_ = v;
    return *this;
  }
  /// Broadcast rank 0's buffers at construction and at the start of every forward().
  /// False leaves each rank's buffers its own from the start, as PyTorch 2.1+ does
  /// (_sync_module_states(broadcast_buffers=...), pytorch#100729; 1.13 copied them anyway).
  DDPOptions& broadcast_buffers(bool v) {
    broadcast_buffers_ = v;
    return *this;
  }

  const std::vector<int>& device_ids() const noexcept { return device_ids_; }
  double bucket_cap_mb() const noexcept { return bucket_cap_mb_; }
  bool find_unused_parameters() const noexcept { return find_unused_parameters_; }
  bool gradient_as_bucket_view() const noexcept { return gradient_as_bucket_view_; }
  bool broadcast_buffers() const noexcept { return broadcast_buffers_; }

 private:
  std::vector<int> device_ids_;
  double bucket_cap_mb_ = 25;
  bool find_unused_parameters_ = false;
  bool gradient_as_bucket_view_ = false;
  bool broadcast_buffers_ = true;
};

/// Wraps a module for training on every rank of the default process group, as
/// torch.nn.parallel.DistributedDataParallel:
///  - construction checks that every rank has the same parameters (count and shapes; a
///    mismatch is a ValueError naming the parameter) and copies rank 0's parameters, and
///    its buffers when broadcast_buffers, to the others;
///  - backward() averages the gradients over the ranks: parameters are grouped into
///    buckets in reverse order (the first 1 MiB, the others bucket_cap_mb), and a bucket's
///    all-reduce starts as soon as the last of its gradients is accumulated, while the
///    rest of backward runs; backward() returns with the averaged gradients in .grad,
///    ordered before later work on the caller's current streams;
///  - a parameter that gets no gradient without find_unused_parameters leaves the
///    reduction unfinished, and the next forward() throws PyTorch's "Expected to have
///    finished reduction in the prior iteration before starting a new one" error.
/// The module is registered as the child "module" (state_dict keys "module.*").
class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options = DDPOptions());
  ~DistributedDataParallel() override;

  /// Broadcasts buffers (broadcast_buffers), runs the module and, when grad mode is on
  /// outside no_sync(), prepares the reducer for the backward pass of the output.
  Tensor forward(const Tensor& input) override;
  /// A forward of any signature (PyTorch's DDP takes any tensors and returns any, e.g. a
  /// recurrent model's (input, hidden) -> (output, hidden)): as forward(input), with
  /// `forward()` calling the wrapped module (the caller moves its inputs to the device)
  /// and the backward pass prepared for the tensors it returns.
  std::vector<Tensor> forward_with(const std::function<std::vector<Tensor>()>& forward);
  /// The wrapped module.
  const std::shared_ptr<Module>& module() const noexcept { return module_; }
  const DDPOptions& options() const noexcept { return options_; }

  /// Within its scope backward() accumulates gradients locally without communicating;
  /// the first backward() after it averages the accumulated gradients.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.require_backward_grad_sync_) {
      ddp_.require_backward_grad_sync_ = false;
    }
    ~NoSyncGuard() { ddp_.require_backward_grad_sync_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  /// `auto guard = ddp.no_sync();` (PyTorch's `with ddp.no_sync():`).
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// The buckets: indices into module()->parameters(), in the order their all-reduces run.
  std::vector<std::vector<size_t>> bucket_indices() const;

 private:
  void sync_buffers();
  void before_forward();
  void after_forward(const std::vector<Tensor>& outputs);

  std::shared_ptr<Module> module_;
  DDPOptions options_;
  std::vector<Tensor> buffers_;
  std::shared_ptr<detail::Reducer> reducer_;
  bool require_backward_grad_sync_ = true;
  bool require_forward_param_sync_ = true;
};

}  // namespace ember::nn::parallel
