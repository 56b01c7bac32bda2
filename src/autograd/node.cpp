#include "autograd/node.h"

#include <atomic>

#include "autograd/saved_variable.h"
#include "ember/cuda.h"
#include "ember/errors.h"

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

// Note [Releasing long graphs]
// A node owns the nodes its next edges lead to. Destroying them recursively, each node's
// destructor releasing its edges, takes a few stack frames per node of a chain, and a
// chain of ~100,000 nodes (a loss summed over a long loop) overflows the stack. As
// PyTorch's deleteNode, the destructor instead moves each edge that holds the last
// reference to its node onto a local stack and destroys those nodes one at a time, each
// after its saved variables were released (a saved non-leaf input holds its grad_fn, the
// other reference to a next node) and its own edges were taken the same way: it then dies
// with nothing left to release recursively. The depth is bounded whatever the graph's
// shape. Only the node whose destructor runs keeps its saved variables until its derived
// part is destroyed, one level above this loop.
namespace {
void take_last_references(std::vector<Edge>& edges, std::vector<std::shared_ptr<Node>>& orphans) {
  for (Edge& e : edges) {
    if (e.function != nullptr && e.function.use_count() == 1) {
      orphans.push_back(std::move(e.function));
    } else {
      e.function.reset();
    }
  }
}
}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> orphans;
  take_last_references(next_edges_, orphans);
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    node->release_variables();
    take_last_references(node->next_edges_, orphans);
  }
}

std::optional<cuda::Stream> node_stream(const Node& node) {
  for (const auto& m : node.internals().inputs) {
    if (m.stream) return m.stream;
  }
  return std::nullopt;
}

Tensor hook_result(unsigned handle, const Tensor& value, Tensor result) {
  if (!result.defined()) return value;
  using ember::detail::IntListPrinter;
  EMBER_CHECK(result.dtype() == value.dtype() && result.is_cuda() == value.is_cuda(), Error, "hook ", handle,
              " has changed the type of value (was ", type_string(value), " got ", type_string(result), ")");
  EMBER_CHECK(result.device() == value.device(), Error, "hook ", handle, " has changed the device of value (was ",
              value.device(), " got ", result.device(), ")");
  EMBER_CHECK(result.sizes() == value.sizes(), Error, "hook ", handle, " has changed the size of value (was ",
              IntListPrinter{value.sizes()}, " got ", IntListPrinter{result.sizes()}, ")");
  return result;
}

unsigned next_hook_handle() { return next_handle.fetch_add(1); }

}  // namespace ember::autograd

namespace ember::autograd {
size_t Node::num_inputs() const noexcept { return internals_->inputs.size(); }
}  // namespace ember::autograd
