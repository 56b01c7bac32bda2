// The host kernels behind cpu::run, one family per file.
#pragma once

#include "kernels/kernel_call.h"

namespace ember::detail::cpu {

void run_copy(const KernelCall& call);                 // cpu_copy.cpp
void run_fill(const KernelCall& call);                 // cpu_copy.cpp
void run_binary(const KernelCall& call);               // cpu_binary.cpp: tensor-tensor ops, comparisons, isclose
void run_unary(const KernelCall& call);                // cpu_unary.cpp: tensor-scalar and unary ops
void run_reduce(const KernelCall& call);               // cpu_reduce.cpp
void run_matmul(const KernelCall& call);               // cpu_matmul.cpp
void run_index_select(const KernelCall& call);         // cpu_index_select.cpp
void run_random(const KernelCall& call);               // cpu_random.cpp: normal, uniform, arange
void run_select(const KernelCall& call);               // cpu_select.cpp: where, clamp
void run_softmax(const KernelCall& call);              // cpu_softmax.cpp: softmax, log_softmax
void run_arg_reduce(const KernelCall& call);           // cpu_arg_reduce.cpp: argmax, argmin
void run_pool(const KernelCall& call);                 // cpu_pool.cpp: max_pool2d, avg_pool2d
void run_max_pool_backward(const KernelCall& call);    // cpu_pool.cpp: max_pool2d's input gradient
void run_nll_loss(const KernelCall& call);             // cpu_loss.cpp
void run_batch_norm_stats(const KernelCall& call);     // cpu_batch_norm.cpp
void run_cumsum(const KernelCall& call);               // cpu_cumsum.cpp
void run_multinomial(const KernelCall& call);          // cpu_cumsum.cpp
void run_sort(const KernelCall& call);                 // cpu_sort.cpp: sort, topk
void run_scatter(const KernelCall& call);              // cpu_scatter.cpp: gather, scatter_add
void run_index_add(const KernelCall& call);            // cpu_index_add.cpp
void run_layer_norm(const KernelCall& call);           // cpu_layer_norm.cpp
void run_layer_norm_backward(const KernelCall& call);  // cpu_layer_norm.cpp
void run_gelu(const KernelCall& call);                 // cpu_gelu.cpp: gelu and its backward
void run_logsumexp(const KernelCall& call);            // cpu_softmax.cpp
void run_triangle(const KernelCall& call);             // cpu_triangle.cpp: triu, tril
void run_rnn_cell(const KernelCall& call);             // cpu_rnn_cell.cpp: fused LSTM and GRU cells, backward
void run_grid_sample(const KernelCall& call);          // cpu_grid_sample.cpp: GridSample, GridSampleBackward

/// PyTorch's "\"name\" not implemented for 'Long'" error, as TypeError.
[[noreturn]] void not_implemented(const char* name, DType dtype);
/// Checks that an op produced by the op layer has the output dtype the kernel writes.
void expect_dtype(const char* name, const TensorArg& arg, DType expected);
/// Raises ZeroDivisionError when an integral `divisor` holds a zero.
void check_no_zero_divisor(const TensorArg& divisor);

}  // namespace ember::detail::cpu
