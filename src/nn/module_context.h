// Errors raised inside a built-in module's forward name the module.
#pragma once

#include <string>

#include "ember/errors.h"
#include "ember/nn/module.h"

namespace ember::detail::nn {

/// Runs `body`; a ValueError, TypeError, IndexError or DeviceError it throws is rethrown
/// as the same type with the module's repr in front: "Linear(in_features=784, ...): mat1
/// and mat2 shapes cannot be multiplied (64x100 and 784x128)".
template <typename Body>
Tensor with_module_context(const ember::nn::Module& module, Body&& body) {
  try {
    return body();
  } catch (const ValueError& e) {
    throw ValueError(module.repr() + ": " + e.what());
  } catch (const TypeError& e) {
    throw TypeError(module.repr() + ": " + e.what());
  } catch (const IndexError& e) {
    throw IndexError(module.repr() + ": " + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(module.repr() + ": " + e.what());
  }
}

}  // namespace ember::detail::nn
