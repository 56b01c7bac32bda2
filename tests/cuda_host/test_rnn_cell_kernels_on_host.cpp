// The driver's fused recurrent cells (cuda_rnn_cell.cu) run on the host against the cpu's
// (cpu_rnn_cell.cpp): forward and backward of the LSTM and GRU cells, float32 and float64,
// states below, at and above a block of threads, and an empty batch.
#include "compare_with_cpu.h"

namespace ember::host_test {
namespace {

TEST(RnnCellKernelsOnHost, LstmAndGruCellsAndTheirBackwardMatchCpu) {
  manual_seed(36);
  for (DType d : {kFloat32, kFloat64}) {
    for (const IntList& state : std::vector<IntList>{{1, 1}, {3, 7}, {2, 300}, {0, 4}}) {
      const int64_t b = state[0], h = state[1];
      const std::string what = std::to_string(b) + "x" + std::to_string(h);
      // Values of about +-6 reach the flat ends of sigmoid and tanh too.
      Tensor ig4 = random({b, 4 * h}, d), hg4 = random({b, 4 * h}, d), cx = random(state, d);
      KernelCall lstm{OpKind::LstmCell, {}, {arg(ig4), arg(hg4), arg(cx)}};
      Tensor hy = empty(state, d), cy = empty(state, d), workspace = empty({b, 4 * h}, d);
      compare_outputs(lstm, {hy, cy, workspace}, "lstm " + what);
      // The backward from the cpu's forward (compare_outputs left it in hy, cy, workspace).
      Tensor grad_hy = random(state, d), grad_cy = random(state, d);
      KernelCall lstm_backward{
          OpKind::LstmCellBackward, {}, {arg(grad_hy), arg(grad_cy), arg(cx), arg(cy), arg(workspace)}};
      compare_outputs(lstm_backward, {empty({b, 4 * h}, d), empty(state, d)}, "lstm backward " + what, 1e-5, 1e-5);

      Tensor ig3 = random({b, 3 * h}, d), hg3 = random({b, 3 * h}, d), hx = random(state, d);
      KernelCall gru{OpKind::GruCell, {}, {arg(ig3), arg(hg3), arg(hx)}};
      Tensor gru_workspace = empty({b, 5 * h}, d);
      compare_outputs(gru, {empty(state, d), gru_workspace}, "gru " + what);
      KernelCall gru_backward{OpKind::GruCellBackward, {}, {arg(grad_hy), arg(gru_workspace)}};
      compare_outputs(gru_backward, {empty({b, 3 * h}, d), empty({b, 3 * h}, d), empty(state, d)},
                      "gru backward " + what, 1e-5, 1e-5);
    }
  }
}

}  // namespace
}  // namespace ember::host_test
