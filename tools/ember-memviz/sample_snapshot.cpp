// memviz_sample_snapshot OUT.json: a small training-like program on two emulated devices
// that records its allocation history and writes a snapshot, for ember-memviz's tests.
//
// On cuda:0: weights that stay allocated (allocate_weights), activations made and freed
// each step on a side stream (run_activations, the most bytes), small gradient buffers
// on a second side stream (accumulate_gradients), and one buffer used on another stream
// whose free is still pending when the snapshot is taken (a busy stream holds it). On
// cuda:1: a few buffers. Functions are out of line so the recorded stacks name them.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "ember/cuda.h"
#include "ember/factories.h"
#include "ember/tensor.h"

namespace sample {

using ember::Tensor;

constexpr int64_t kFloatsPerMiB = (int64_t{1} << 20) / 4;

ember::TensorOptions on(int device) {
  return ember::TensorOptions().device(ember::Device(ember::DeviceType::CUDA, device));
}

[[gnu::noinline]] std::vector<Tensor> allocate_weights(int device) {
  std::vector<Tensor> weights;
  for (int64_t mib : {4, 12, 6, 3}) weights.push_back(ember::zeros({mib * kFloatsPerMiB}, on(device)));
  asm volatile("" ::: "memory");
  return weights;
}

[[gnu::noinline]] void run_activations(int steps) {
  ember::cuda::Stream stream(0);
  ember::cuda::StreamGuard guard(stream);
  for (int step = 0; step < steps; ++step) {
    std::vector<Tensor> layers;
    for (int64_t mib : {8, 8, 16}) layers.push_back(ember::empty({mib * kFloatsPerMiB}, on(0)));
    layers.push_back(ember::empty({3000 + step}, on(0)));  // a small odd-sized one
    layers.clear();
  }
  stream.synchronize();
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] std::vector<Tensor> accumulate_gradients(int count) {
  ember::cuda::Stream stream(0);
  ember::cuda::StreamGuard guard(stream);
  std::vector<Tensor> kept;
  for (int i = 0; i < count; ++i) {
    Tensor grad = ember::zeros({64 * 1024 + 512 * i}, on(0));
    if (i % 3 == 0) kept.push_back(grad);  // every third one stays alive
  }
  asm volatile("" ::: "memory");
  return kept;
}

// A buffer used on a busy stream and freed: its block waits for that stream.
[[gnu::noinline]] void free_while_in_use() {
  ember::cuda::Stream busy(0);
  Tensor buffer = ember::empty({2 * kFloatsPerMiB}, on(0));
  {
    ember::cuda::StreamGuard guard(busy);
    ember::cuda::sleep(std::chrono::milliseconds(500));
  }
  buffer.record_stream(busy);
  asm volatile("" ::: "memory");
}

}  // namespace sample

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: memviz_sample_snapshot OUT.json\n");
    return 2;
  }
  ember::cuda::emulate(2, size_t{1} << 30);
  ember::cuda::record_memory_history(true);
  std::vector<ember::Tensor> weights0 = sample::allocate_weights(0);
  std::vector<ember::Tensor> weights1 = sample::allocate_weights(1);
  sample::run_activations(6);
  std::vector<ember::Tensor> grads = sample::accumulate_gradients(12);
  sample::free_while_in_use();
  std::ofstream out(argv[1]);
  out << ember::cuda::memory_snapshot_json();
  out.close();
  if (!out) {
    std::fprintf(stderr, "memviz_sample_snapshot: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
