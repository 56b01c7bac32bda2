#include "ember/nn/modules/pooling.h"

#include "ember/nn.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

MaxPool2d::MaxPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation, bool ceil_mode)
    : kernel_size(kernel_size),
      stride(stride.value_or(kernel_size)),
      padding(padding),
      dilation(dilation),
      ceil_mode(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    return functional::max_pool2d(input, kernel_size.list(), stride.list(), padding.list(), dilation.list(), ceil_mode);
  });
}

std::shared_ptr<Module> MaxPool2d::clone() const {
  return detail::nn::clone_as(
      *this, [&] { return std::make_shared<MaxPool2d>(kernel_size, stride, padding, dilation, ceil_mode); });
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", stride=" + stride.repr() + ", padding=" + padding.repr() +
         ", dilation=" + dilation.repr() + ", ceil_mode=" + detail::python_bool(ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                     bool count_include_pad)
    : kernel_size(kernel_size),
      stride(stride.value_or(kernel_size)),
      padding(padding),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    return functional::avg_pool2d(input, kernel_size.list(), stride.list(), padding.list(), ceil_mode,
                                  count_include_pad);
  });
}

std::shared_ptr<Module> AvgPool2d::clone() const {
  return detail::nn::clone_as(
      *this, [&] { return std::make_shared<AvgPool2d>(kernel_size, stride, padding, ceil_mode, count_include_pad); });
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", stride=" + stride.repr() + ", padding=" + padding.repr();
}

}  // namespace ember::nn
