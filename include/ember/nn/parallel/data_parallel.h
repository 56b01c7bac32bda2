// nn::DataParallel: one process, several cuda devices (PyTorch's torch.nn.DataParallel).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/nn/module.h"
#include "ember/tensor.h"

namespace ember::detail::nn {

/// How DataParallel makes a replica of a module: its clone() or a default-constructed
/// object of its type; `how` names the way in error messages.
struct ReplicaFactory {
  std::function<std::shared_ptr<ember::nn::Module>(const ember::nn::Module&)> make;
  std::string how;
};

/// True when M itself declares clone(): one inherited from a base (a network derived
/// from Sequential) would make an object of the base's type.
template <typename M>
inline constexpr bool declares_clone =
    std::is_same_v<decltype(&M::clone), std::shared_ptr<ember::nn::Module> (M::*)() const>;

/// clone() when M declares it; else M's default constructor when it has one; else the
/// dynamic type's clone() (the static type may be a base, Module itself included).
template <typename M>
ReplicaFactory replica_factory() {
  if constexpr (!std::is_same_v<M, ember::nn::Module> && !declares_clone<M> && std::is_default_constructible_v<M>) {
    return {[](const ember::nn::Module&) -> std::shared_ptr<ember::nn::Module> { return std::make_shared<M>(); },
            "its default constructor"};
  } else {
    return {[](const ember::nn::Module& m) { return m.clone(); }, "clone()"};
  }
}

}  // namespace ember::detail::nn

namespace ember::nn {

/// Runs a module on several cuda devices of this process, as PyTorch's DataParallel. Each
/// forward call:
/// 1. scatters the input along dim 0 (Tensor::chunk's sizes; a short batch makes fewer
///    chunks, and only that many replicas run);
/// 2. replicates the module onto those devices: each replica's parameters are a
///    differentiable broadcast of the module's (gradients flow back and sum on the module's
///    parameters), its buffers copies (on device_ids[0], the module's own storage, so
///    in-place updates there, such as BatchNorm's running statistics, are kept);
/// 3. runs each replica on a thread of its own (a single replica in the calling thread),
///    with its device current and, current there, the stream that is current on that
///    device in the calling thread;
/// 4. gathers the outputs along dim 0 on output_device (differentiable).
/// An exception in a replica is rethrown in the caller with "Caught <Type> in replica <i>
/// on device <d>." in front of its message, keeping ember's and the standard types.
///
/// Replicas are made anew for every forward call (a graph keeps its replica alive until
/// its backward), with the module's clone() when its type overrides it, else with its
/// type's default constructor; the constructor checks that a replica's parameters and
/// buffers have the module's names and shapes (ValueError otherwise). Making a replica
/// runs the module's initialisation, which draws no random numbers as far as the rest of
/// the program can tell: the generators are restored afterwards.
///
/// BatchNorm in training mode normalises each replica's chunk with that chunk's
/// statistics, and only replica 0's running-statistics update reaches the module (as in
/// PyTorch); in eval mode the outputs equal the module's on the whole batch.
///
/// Without cuda devices the module is simply called.
class DataParallel : public Module {
 public:
  /// device_ids: the cuda devices to use, all of them when empty; output_device: where
  /// outputs are gathered, device_ids[0] by default, -1 for the cpu. The module must have
  /// its parameters and buffers on device_ids[0] when called (with one device, the
  /// constructor moves it there).
  template <typename M>
  explicit DataParallel(std::shared_ptr<M> module, std::vector<int> device_ids = {},
                        std::optional<int> output_device = std::nullopt)
      : DataParallel(std::static_pointer_cast<Module>(std::move(module)), detail::nn::replica_factory<M>(),
                     std::move(device_ids), output_device) {}

  Tensor forward(const Tensor& input) override;

  /// A forward of any signature (PyTorch's DataParallel takes any tensors and returns any,
  /// e.g. a recurrent model's (input, hidden) -> (output, hidden)): scatters each of
  /// `inputs` along `dim` (as many replicas run as the input with the fewest chunks makes,
  /// as PyTorch's scatter zips them), calls `forward(replica, its chunks)` for each replica
  /// under the conditions of forward(input), and gathers the j-th tensor every replica
  /// returns along `dim` on output_device (every replica must return as many). Without cuda
  /// devices, or with one, `forward(module, inputs)` on the whole inputs.
  using ReplicaForward = std::function<std::vector<Tensor>(Module& replica, const std::vector<Tensor>& inputs)>;
  std::vector<Tensor> forward_with(const std::vector<Tensor>& inputs, const ReplicaForward& forward, int64_t dim = 0);

  /// The wrapped module (registered as the child "module", as in PyTorch's state_dict).
  std::shared_ptr<Module> module() const { return module_; }
  /// The devices in use; empty without cuda devices.
  const std::vector<int>& device_ids() const noexcept { return device_ids_; }
  /// The device outputs are gathered on; -1 for the cpu.
  int output_device() const noexcept { return output_device_; }

 private:
  DataParallel(std::shared_ptr<Module> module, detail::nn::ReplicaFactory factory, std::vector<int> device_ids,
               std::optional<int> output_device);
  void check_module_on_source() const;

  std::shared_ptr<Module> module_;
  detail::nn::ReplicaFactory factory_;
  std::vector<int> device_ids_;
  int output_device_ = -1;
};

}  // namespace ember::nn
