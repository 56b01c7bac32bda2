// Batch normalisation modules.
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

/// The shared part of BatchNorm1d and BatchNorm2d (PyTorch's _BatchNorm). weight (ones)
/// and bias (zeros) when affine; running_mean (zeros), running_var (ones) and
/// num_batches_tracked (int64 0) buffers when track_running_stats. momentum nullopt
/// means a cumulative average (factor 1 / num_batches_tracked).
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_running_stats();
  void reset_parameters();

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  void rebind_members(const MemberRemap& remap) override;
  BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine, bool track_running_stats);
  /// ValueError unless the input has a dimension count this module accepts.
  virtual void check_input_dim(const Tensor& input) const = 0;
};

/// Over (N, C) or (N, C, L) input.
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}
  std::shared_ptr<Module> clone() const override;

 private:
  void check_input_dim(const Tensor& input) const override;
};

/// Over (N, C, H, W) input.
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}
  std::shared_ptr<Module> clone() const override;

 private:
  void check_input_dim(const Tensor& input) const override;
};

}  // namespace ember::nn
