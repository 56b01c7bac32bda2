// nn::MultiheadAttention: PyTorch's multi_head_attention_forward, the explicit path
// (q k^T / sqrt(d) + mask, softmax, dropout, @ v), run for every head at once as batched
// matrix products over [N * heads, L, head_dim].
#include "ember/nn/modules/attention.h"

#include <cmath>
#include <limits>

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "ember/ops.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {
namespace {

// PyTorch's str(tensor.shape): "torch.Size([3, 3])".
std::string shape_str(const Tensor& t) {
  std::string out = "torch.Size([";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "])";
}

// PyTorch's _canonical_mask: a bool mask becomes a float one (-inf where true); a floating
// mask is used as it is; anything else is refused.
Tensor float_mask(const Tensor& mask, const char* name, DType dtype) {
  EMBER_CHECK(mask.dtype() == kBool || is_floating_point(mask.dtype()), TypeError, "only bool and floating types of ",
              name, " are supported");
  if (mask.dtype() != kBool) return mask.to(dtype);
  return zeros(mask.sizes(), TensorOptions(mask.device()).dtype(dtype))
      .masked_fill(mask, -std::numeric_limits<double>::infinity());
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first)
    : embed_dim(embed_dim), num_heads(num_heads), head_dim(0), dropout(dropout), batch_first(batch_first) {
  EMBER_CHECK(embed_dim > 0 && num_heads > 0, ValueError,
              "embed_dim and num_heads must be greater than 0, got embed_dim=", embed_dim,
              " and num_heads=", num_heads);
  EMBER_CHECK(embed_dim % num_heads == 0, ValueError, "embed_dim must be divisible by num_heads");
  EMBER_CHECK(dropout >= 0 && dropout <= 1, ValueError, "dropout probability has to be between 0 and 1, but got ",
              detail::python_float(dropout));
  head_dim = embed_dim / num_heads;
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  in_proj_bias = register_parameter("in_proj_bias", bias ? empty({3 * embed_dim}) : Tensor());
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x, {}, /*need_weights=*/false).first; }

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query_in, const Tensor& key_in,
                                                      const Tensor& value_in, const Tensor& key_padding_mask,
                                                      bool need_weights, const Tensor& attn_mask_in,
                                                      bool average_attn_weights, bool is_causal) {
  Tensor weights;
  Tensor output = detail::nn::with_module_context(*this, [&] {
    const bool batched = query_in.dim() == 3;
    EMBER_CHECK(query_in.dim() == 3 || query_in.dim() == 2, ValueError,
                "query should be unbatched 2D or batched 3D tensor but received ", query_in.dim(), "-D query tensor");
    EMBER_CHECK(key_in.dim() == query_in.dim() && value_in.dim() == query_in.dim(), ValueError, "For ",
                batched ? "batched (3-D)" : "unbatched (2-D)", " `query`, expected `key` and `value` to be ",
                batched ? "3-D" : "2-D", " but found ", key_in.dim(), "-D and ", value_in.dim(),
                "-D tensors respectively");
    // Internally sequence-first: [L, N, E].
    auto seq_first = [&](const Tensor& t) { return !batched ? t.unsqueeze(1) : batch_first ? t.transpose(0, 1) : t; };
    const Tensor query = seq_first(query_in), key = seq_first(key_in), value = seq_first(value_in);
    const int64_t L = query.size(0), N = query.size(1), S = key.size(0);
    EMBER_CHECK(query.size(2) == embed_dim, ValueError, "was expecting embedding dimension of ", embed_dim,
                ", but got ", query.size(2));
    EMBER_CHECK(key.sizes() == value.sizes(), ValueError, "key shape ", shape_str(key_in),
                " does not match value shape ", shape_str(value_in));
    EMBER_CHECK(key.size(1) == N && key.size(2) == embed_dim, ValueError, "key's batch and embedding sizes ",
                shape_str(key_in), " do not match the query's ", shape_str(query_in));

    // Input projection: one product when it is self-attention, else one per input.
    Tensor q, k, v;
    if (query_in.is_same(key_in) && key_in.is_same(value_in)) {
      std::vector<Tensor> qkv = functional::linear(query, in_proj_weight, in_proj_bias).chunk(3, -1);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      std::vector<Tensor> w = in_proj_weight.chunk(3, 0);
      std::vector<Tensor> b = in_proj_bias.defined() ? in_proj_bias.chunk(3, 0) : std::vector<Tensor>(3);
      q = functional::linear(query, w[0], b[0]);
      k = functional::linear(key, w[1], b[1]);
      v = functional::linear(value, w[2], b[2]);
    }
    // [L, N, E] -> [N * heads, L, head_dim]
    auto heads = [&](const Tensor& t, int64_t len) {
      return t.reshape({len, N * num_heads, head_dim}).transpose(0, 1);
    };
    q = heads(q, L), k = heads(k, S), v = heads(v, S);

    // Masks, as one float mask added to the scores (broadcast over heads and batch).
    const DType dtype = q.dtype();
    Tensor mask;
    if (attn_mask_in.defined()) {
      mask = float_mask(attn_mask_in, "attn_mask", dtype);
      if (mask.dim() == 2) {
        EMBER_CHECK(mask.size(0) == L && mask.size(1) == S, ValueError, "The shape of the 2D attn_mask is ",
                    shape_str(mask), ", but should be (", L, ", ", S, ").");
        mask = mask.unsqueeze(0);
      } else {
        EMBER_CHECK(mask.dim() == 3, ValueError, "attn_mask's dimension ", mask.dim(), " is not supported");
        EMBER_CHECK(mask.size(0) == N * num_heads && mask.size(1) == L && mask.size(2) == S, ValueError,
                    "The shape of the 3D attn_mask is ", shape_str(mask), ", but should be (", N * num_heads, ", ", L,
                    ", ", S, ").");
      }
    } else if (is_causal) {
      const TensorOptions on(q.device());
      mask = float_mask(arange(S, on).unsqueeze(0).gt(arange(L, on).unsqueeze(1)), "attn_mask", dtype).unsqueeze(0);
    }
    if (key_padding_mask.defined()) {
      Tensor kpm = float_mask(key_padding_mask, "key_padding_mask", dtype);
      EMBER_CHECK((batched && kpm.dim() == 2 && kpm.size(0) == N && kpm.size(1) == S) ||
                      (!batched && kpm.dim() == 1 && kpm.size(0) == S),
                  ValueError, "expecting key_padding_mask shape of ",
                  batched ? detail::python_tuple({N, S}) : detail::python_tuple({S}), ", but got ", shape_str(kpm));
      kpm = kpm.reshape({N, 1, 1, S}).expand({N, num_heads, 1, S}).reshape({N * num_heads, 1, S});
      mask = mask.defined() ? mask + kpm : kpm;
    }

    // q is scaled before the product, as PyTorch's explicit path.
    Tensor scores = bmm(q * (1.0 / std::sqrt(static_cast<double>(head_dim))), k.transpose(1, 2));
    if (mask.defined()) scores = scores + mask;
    Tensor attn = scores.softmax(-1);
    if (dropout > 0 && is_training()) attn = functional::dropout(attn, dropout, true);
    Tensor out = bmm(attn, v);                                        // [N * heads, L, head_dim]
    out = out.transpose(0, 1).contiguous().view({L * N, embed_dim});  // [L * N, E]
    out = out_proj->forward(out).view({L, N, embed_dim});
    if (need_weights) {
      weights = attn.view({N, num_heads, L, S});
      if (average_attn_weights) weights = weights.mean(1);
      if (!batched) weights = weights.squeeze(0);
    }
    return !batched ? out.squeeze(1) : batch_first ? out.transpose(0, 1) : out;
  });
  return {output, weights};
}

std::shared_ptr<Module> MultiheadAttention::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<MultiheadAttention>(embed_dim, num_heads, dropout, in_proj_bias.defined(), batch_first);
  });
}

void MultiheadAttention::rebind_members(const MemberRemap& remap) {
  remap(in_proj_weight);
  remap(in_proj_bias);
  remap(out_proj);
}

}  // namespace ember::nn
