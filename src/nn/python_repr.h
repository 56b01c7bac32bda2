// Python's spelling of values in reprs and messages (repr(float), True/False, tuples).
#pragma once

#include <string>

#include "ember/tensor.h"

namespace ember::detail {

/// repr(x) for a Python float: the shortest digits that round-trip, "0.1", "1e-05", "2.0".
std::string python_float(double x);
inline const char* python_bool(bool b) { return b ? "True" : "False"; }
/// A tuple as Python prints it: "(3, 3)", "(1,)".
std::string python_tuple(const IntList& values);

}  // namespace ember::detail
