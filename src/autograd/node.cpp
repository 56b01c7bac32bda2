#include "autograd/node.h"

#include <atomic>

#include "ember/cuda.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
std::atomic<unsigned> next_handle{1};
}  // namespace

InputMetadata InputMetadata::of(const Tensor& t) {
  InputMetadata m{t.sizes(), t.dtype(), t.device(), std::nullopt};
  if (m.device.is_cuda()) m.stream = cuda::current_stream(m.device.index());
  return m;
}

Node::Node(std::vector<Edge> next_edges) : Node(std::move(next_edges), next_sequence_nr.fetch_add(1)) {}

Node::Node(std::vector<Edge> next_edges, uint64_t sequence_nr)
    : next_edges_(std::move(next_edges)), sequence_nr_(sequence_nr), internals_(std::make_unique<Internals>()) {}

Node::~Node() = default;

std::optional<cuda::Stream> node_stream(const Node& node) {
  for (const auto& m : node.internals().inputs) {
    if (m.stream) return m.stream;
  }
  return std::nullopt;
}

unsigned next_hook_handle() { return next_handle.fetch_add(1); }

}  // namespace ember::autograd

namespace ember::autograd {
size_t Node::num_inputs() const noexcept { return internals_->inputs.size(); }
}  // namespace ember::autograd
