// Autograd's side of the recording seam (Note [Recording ops] in src/ops/recording.h), and
// FormulaNode.
#include <algorithm>

#include "autograd/autograd_meta.h"
#include "autograd/formula_node.h"
#include "autograd/view_history.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd::detail {

namespace {
bool differentiable(const Tensor& t) { return t.defined() && (is_floating_point(t.dtype()) || is_complex(t.dtype())); }

class AutogradRecorder final : public ember::detail::Recorder {
 public:
  void record(Formula formula, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs, Attrs attrs,
              bool inplace, const std::vector<uint32_t>& read_versions) override;
  void note_view(const Tensor& self, const Tensor& view, bool multi_output) override {
    detail::note_view(self, view, multi_output);
  }
  void check_inplace(const Tensor& self, const Tensor& other) override;
  void record_inplace(Formula formula, const Tensor& before, const Tensor& other, Tensor& self, Attrs attrs,
                      std::vector<uint32_t> read_versions) override;
};

void AutogradRecorder::record(Formula formula, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs,
                              Attrs attrs, bool inplace, const std::vector<uint32_t>& read_versions) {
  if (std::none_of(outputs.begin(), outputs.end(), [](const Tensor* t) { return differentiable(*t); })) return;
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  for (size_t o = inplace ? 1 : 0; o < outputs.size(); ++o) {
    Tensor* out = outputs[o];
    for (const Tensor& in : inputs) {
      if (out->defined() && out->is_same(in)) *out = alias_of(*out);
    }
    if (!inplace && !ember::detail::is_view_op(formula)) drop_no_grad_view(*out);
  }
  auto node = std::make_shared<FormulaNode>(formula, std::move(edges), std::move(attrs));
  node->save(inputs, outputs, read_versions);
  auto& metadata = node->internals().inputs;
  metadata.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = *outputs[i];
    metadata.push_back(InputMetadata::of(out));
    if (!differentiable(out)) continue;
    AutogradMeta& meta = materialize_meta(out);
    meta.grad_fn_ = node;
    meta.output_nr_ = static_cast<uint32_t>(i);
  }
}

void AutogradRecorder::check_inplace(const Tensor& self, const Tensor& other) {
  if (!is_grad_enabled()) return;
  AutogradMeta* meta = meta_of(self);
  if (ember::detail::should_record(self, other)) {
    // As PyTorch, everything that would refuse the op's recording refuses it before the write.
    if (meta != nullptr && meta->view_base_.defined()) check_view_inplace(*meta);
    if (AutogradMeta* m = meta_of(other); m != nullptr && m->view_base_.defined()) (void)view_is_stale(other, *m);
  }
  if (meta == nullptr) return;
  auto leaf_requiring_grad = [](const AutogradMeta* m) { return m != nullptr && m->requires_grad_ && !m->grad_fn_; };
  EMBER_CHECK(!(meta->view_base_.defined() && leaf_requiring_grad(meta_of(meta->view_base_))), Error,
              "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  EMBER_CHECK(!leaf_requiring_grad(meta), Error,
              "a leaf Variable that requires grad is being used in an in-place operation.");
}

void AutogradRecorder::record_inplace(Formula formula, const Tensor& before, const Tensor& other, Tensor& self,
                                      Attrs attrs, std::vector<uint32_t> read_versions) {
  std::vector<Tensor> inputs{before};
  if (other.defined()) inputs.push_back(other);
  AutogradMeta* meta = meta_of(self);
  if (meta != nullptr && meta->view_base_.defined()) {
    rebase_view(formula, inputs, self, std::move(attrs), read_versions);
    return;
  }
  record(formula, inputs, std::vector<Tensor*>{&self}, std::move(attrs), /*inplace=*/true, read_versions);
}

// Installed when the library loads; ops made before (by other files' static initialisers)
// find the null recorder, and nothing requires grad then.
constinit AutogradRecorder g_recorder;
[[maybe_unused]] const bool g_installed = (ember::detail::install_recorder(&g_recorder), true);

}  // namespace

// ---- FormulaNode -----------------------------------------------------------------------

FormulaNode::FormulaNode(Formula formula, std::vector<Edge> edges, Attrs attrs)
    : Node(std::move(edges)), formula_(formula), backward_(backward_of(formula)), attrs_(std::move(attrs)) {
  EMBER_ASSERT(ember::detail::args_match(formula, attrs_));  // the op gave what the formula's row names
}

void FormulaNode::save(const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outputs,
                       const std::vector<uint32_t>& read_versions) {
  infos_.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined()) {
      infos_.push_back({t.sizes(), t.strides(), t.storage_offset(), t.dtype(), t.device()});
    } else {
      infos_.push_back({});
    }
  }
  if (ember::detail::saves_inputs(formula_)) {
    saved_inputs_.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::optional<uint32_t> version;
      if (i < read_versions.size()) version = read_versions[i];
      saved_inputs_.emplace_back(inputs[i], false, version);
    }
  }
  if (ember::detail::saves_output(formula_)) {
    for (const Tensor* out : outputs) saved_outputs_.emplace_back(*out, true);
  }
}

std::vector<Tensor> FormulaNode::apply(std::vector<Tensor>&& grads) {
  bool any = std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
  if (!any) return std::vector<Tensor>(next_edges().size());
  if (grads.size() == 1) return backward_(*this, grads);
  // Multi-output ops: a missing gradient of one output is zero.
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      const auto& m = internals().inputs[i];
      grads[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
    }
  }
  return backward_(*this, grads);
}

void FormulaNode::release_variables() {
  for (auto& s : saved_inputs_) s.reset();
  for (auto& s : saved_outputs_) s.reset();
}

// ---- helpers ---------------------------------------------------------------------------

Tensor real(const Tensor& t) { return is_complex(t.dtype()) ? t.to(to_real(t.dtype())) : t; }

Tensor conj(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  return real(t) * 2 - t;  // re - i im
}

// One sum over every broadcast dim (a float16 gradient is rounded once, as PyTorch's sum_to).
Tensor sum_to(const Tensor& g, const IntList& shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  IntList dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[static_cast<size_t>(d)] == 1 && g.size(lead + d) != 1) dims.push_back(lead + d);
  }
  if (dims.empty()) return g.reshape(shape);  // only leading dims of size 1
  Tensor out = g.sum(dims, /*keepdim=*/true);
  return lead == 0 ? out : out.reshape(shape);
}

}  // namespace ember::autograd::detail
