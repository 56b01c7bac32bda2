// GraphTask: the state of one backward pass (one call of backward() or grad()).
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/input_buffer.h"
#include "autograd/node.h"

namespace ember::autograd {

struct GraphTask {
  GraphTask(bool keep_graph, bool create_graph) : keep_graph(keep_graph), create_graph(create_graph) {}

  bool keep_graph;
  bool create_graph;
  /// Edges still to arrive at each reachable node.
  std::unordered_map<Node*, int> dependencies;
  /// Nodes that received some but not all of their gradients.
  std::unordered_map<Node*, InputBuffer> pending;

  /// With targets (grad(), or backward() with inputs): which nodes run, and which
  /// inputs of which nodes are captured as results. Empty: every node runs.
  struct Capture {
    uint32_t input_nr;
    size_t index;
  };
  struct ExecInfo {
    bool needed = false;
    std::vector<Capture> captures;
  };
  std::unordered_map<Node*, ExecInfo> exec_info;
  std::vector<Tensor> captured;

  /// Streams that gradient work was queued on (rule 3 makes the caller wait for them).
  std::vector<cuda::Stream> used_streams;
  std::vector<std::function<void()>> callbacks;
  std::mutex callbacks_mutex;

  bool should_run(Node* node) const {
    if (exec_info.empty()) return true;
    auto it = exec_info.find(node);
    return it != exec_info.end() && it->second.needed;
  }
  bool should_visit(Node* node) const {
    if (exec_info.empty()) return true;
    auto it = exec_info.find(node);
    return it != exec_info.end() && (it->second.needed || !it->second.captures.empty());
  }
};

}  // namespace ember::autograd
