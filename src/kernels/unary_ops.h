// The element-wise unary ops of floating inputs, each declared once.
//
// Note [Declaring an op]
// One row per op, X(Kind, name, Functor, saves_output, derivative):
//   Kind          its OpKind (kernel_call.h) and its Formula (src/ops/formulas.h), both
//                 made from this list
//   name          the public function ember::name (declared in include/ember/ops.h, defined
//                 from this list in src/ops/elementwise.cpp) and the name errors use (op_name.cpp)
//   Functor       the body, written once for host and device (functors.h): the cpu backend
//                 maps it (cpu_unary.cpp), the driver launches it (cuda_unary.cu), and the
//                 host-run CUDA test (tests/cuda_host) compares the two for every row
//   saves_output  the save rule: the node always keeps the input (a backward that is itself
//                 recorded recomputes the output from it); true also keeps the output
//   derivative    the input's gradient, an expression of g (the output's gradient), x() (the
//                 input) and y() (the output), as a line of PyTorch's derivatives.yaml; it is
//                 expanded in src/autograd/formulas.cpp, where conj() and the public ops are
//                 in scope (Note [Formulas as data] there)
// The op layer promotes integral inputs to the default floating dtype; kernels accept
// floating and complex dtypes and refuse the others; a functor named in kRealOnlyUnary
// (functors.h) refuses complex ones too, as PyTorch's erf does. The op list (kernels/op_list.h,
// Note [The op list]) takes these rows as its own, and every site that switches on OpKind
// expands this list, so a new row needs no edit there. Ops outside this family (neg, abs,
// relu: their own dtype rules) are written out by hand beside it.
#pragma once

// clang-format off
#define EMBER_FLOAT_UNARY_OPS(X)                                        \
  X(Exp,     exp,     ExpFn,     true,  g * conj(y()))                    \
  X(Log,     log,     LogFn,     false, g / conj(x()))                    \
  X(Sqrt,    sqrt,    SqrtFn,    true,  g / (conj(y()) * 2))              \
  X(Sigmoid, sigmoid, SigmoidFn, true,  g * conj(y() * (1 - y())))          \
  X(Tanh,    tanh,    TanhFn,    true,  g * conj(1 - y() * y()))           \
  X(Rsqrt,   rsqrt,   RsqrtFn,   true,  g * conj(y() * y() * y()) * -0.5)  \
  X(Erf,     erf,     ErfFn,     false, g * (x() * x()).neg().exp() * 1.1283791670955126)
// clang-format on

/// Expands to `case OpKind::Kind:` for every row (for a switch over OpKind).
#define EMBER_FLOAT_UNARY_CASE(Kind, ...) case ::ember::detail::OpKind::Kind:
