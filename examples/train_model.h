// The classifier of examples/train: a small CNN for 28x28 grey images (Fashion-MNIST), also
// timed by bench/bench_gpu against the same network in PyTorch (bench/torch_gpu.py).
#pragma once

#include <initializer_list>
#include <memory>

#include "ember/ember.h"

namespace examples {

/// conv(1->16, 3x3, pad 1) ReLU maxpool(2), conv(16->32) ReLU maxpool(2), then
/// Linear(32*7*7 -> 128) ReLU Dropout(0.25) Linear(128 -> 10). Inputs are standardised with
/// Fashion-MNIST's pixel mean and deviation (0.2860, 0.3530).
class FashionCnn : public ember::nn::Module {
 public:
  FashionCnn() {
    namespace nn = ember::nn;
    using Modules = std::initializer_list<std::shared_ptr<nn::Module>>;
    features = register_module(
        "features", std::make_shared<nn::Sequential>(
                        Modules{std::make_shared<nn::Conv2d>(1, 16, 3, 1, 1), std::make_shared<nn::ReLU>(),
                                std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Conv2d>(16, 32, 3, 1, 1),
                                std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2)}));
    classifier = register_module(
        "classifier",
        std::make_shared<nn::Sequential>(Modules{
            std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32 * 7 * 7, 128),
            std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.25), std::make_shared<nn::Linear>(128, 10)}));
  }
  ember::Tensor forward(const ember::Tensor& x) override {
    return classifier->forward(features->forward((x - 0.2860) / 0.3530));
  }

  std::shared_ptr<ember::nn::Sequential> features, classifier;
};

}  // namespace examples
