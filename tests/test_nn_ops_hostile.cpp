// Modules and ops under hostile use (issue 34: items 5, 8, 10, 11, 12 and 19): clone() of
// modules with tied or late-registered parameters and its random generators, in-place ops
// whose self is also an input, clip_grad of order 0 and with a NaN bound, attention rows
// masked whole, GELU's backward at infinities, and sizes PyTorch accepts. Expected numbers
// come from PyTorch 1.13 (/usr/bin/python3); where PyTorch 2 differs, its behaviour (read in
// its source) is what is expected, as each test says.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/ember.h"
#include "kernels/transformer_kernels.h"
#include "test_support.h"

namespace ember::testing {
namespace {

namespace F = nn::functional;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> values(const Tensor& t) { return t.detach().cpu().contiguous().reshape({-1}).to_vector<float>(); }

bool same_values(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && values(a) == values(b); }

// ---- items 5 and 10: clone() as copy.deepcopy ---------------------------------------------------

TEST(CloneHostile, TiedLayerNormOfAnEncoderLayerStaysTiedInTheCopy) {
  // PyTorch: layer.norm2.weight = layer.norm1.weight; copy.deepcopy(layer) keeps one tensor.
  nn::TransformerEncoderLayer layer(4, 2, 8, /*dropout=*/0.0);
  layer.norm2->weight = layer.norm2->register_parameter("weight", layer.norm1->weight);
  {
    NoGradGuard no_grad;
    layer.norm1->weight.mul_(full({4}, 3.0f));
  }
  auto copy = std::dynamic_pointer_cast<nn::TransformerEncoderLayer>(layer.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(copy->norm2->weight.is_same(copy->norm1->weight));
  EXPECT_TRUE(copy->norm2->named_parameters()["weight"].is_same(copy->norm1->weight));
  EXPECT_FALSE(copy->norm1->weight.is_same(layer.norm1->weight));
  EXPECT_EQ(copy->parameters().size(), layer.parameters().size());
  EXPECT_EQ(copy->named_parameters().keys(), layer.named_parameters().keys());
  EXPECT_TRUE(same_values(copy->norm1->weight, layer.norm1->weight));
  Tensor x = randn({3, 2, 4});
  layer.eval();
  copy->eval();
  EXPECT_TRUE(same_values(copy->forward(x), layer.forward(x)));
  {
    NoGradGuard no_grad;
    copy->norm1->weight.fill_(0.5f);  // one tensor in the copy: both norms see it
  }
  EXPECT_EQ(values(copy->norm2->weight), std::vector<float>(4, 0.5f));
  EXPECT_EQ(values(layer.norm2->weight), std::vector<float>(4, 3.0f));
}

TEST(CloneHostile, ParametersAndBuffersRegisteredAfterConstructionAreCopied) {
  nn::MultiheadAttention attention(4, 2);
  attention.register_parameter("extra", full({2}, 7.0f));
  attention.register_buffer("counts", full({3}, 2.0f), /*persistent=*/false);
  attention.register_module("side", std::make_shared<nn::Linear>(2, 1));
  auto copy = attention.clone();
  EXPECT_EQ(copy->named_parameters().keys(), attention.named_parameters().keys());
  EXPECT_EQ(copy->named_buffers().keys(), (std::vector<std::string>{"counts"}));
  EXPECT_EQ(copy->state_dict().keys(), attention.state_dict().keys());  // "counts" stays non-persistent
  const Tensor extra = copy->named_parameters()["extra"];
  EXPECT_FALSE(extra.is_same(attention.named_parameters()["extra"]));
  EXPECT_EQ(values(extra), std::vector<float>(2, 7.0f));
  EXPECT_TRUE(extra.requires_grad());
  EXPECT_TRUE(same_values(copy->named_parameters()["side.weight"], attention.named_parameters()["side.weight"]));
}

TEST(CloneHostile, WeightTiedAcrossAModuleDictIsOneParameterInTheCopy) {
  // PyTorch: d = ModuleDict({"wte": Embedding(5, 3), "lm_head": Linear(3, 5, bias=False)});
  // d.lm_head.weight = d.wte.weight; c = copy.deepcopy(d): one parameter, tied in c.
  nn::ModuleDict dict;
  auto wte = std::dynamic_pointer_cast<nn::Embedding>(dict.insert("wte", std::make_shared<nn::Embedding>(5, 3)));
  auto head = std::dynamic_pointer_cast<nn::Linear>(dict.insert("lm_head", std::make_shared<nn::Linear>(3, 5, false)));
  head->weight = head->register_parameter("weight", wte->weight);
  ASSERT_EQ(dict.parameters().size(), 1u);
  auto copy = std::dynamic_pointer_cast<nn::ModuleDict>(dict.clone());
  ASSERT_NE(copy, nullptr);
  auto copy_wte = std::dynamic_pointer_cast<nn::Embedding>((*copy)["wte"]);
  auto copy_head = std::dynamic_pointer_cast<nn::Linear>((*copy)["lm_head"]);
  EXPECT_EQ(copy->parameters().size(), 1u);
  EXPECT_TRUE(copy_head->weight.is_same(copy_wte->weight));
  EXPECT_FALSE(copy_wte->weight.is_same(wte->weight));
  EXPECT_TRUE(same_values(copy_wte->weight, wte->weight));
  // Training the copy's embedding moves its head (forward reads the member), not the original's.
  {
    NoGradGuard no_grad;
    copy_wte->weight.fill_(1.0f);
  }
  EXPECT_EQ(values(copy_head->forward(ones({1, 3}))), std::vector<float>(5, 3.0f));
  EXPECT_FALSE(same_values(head->forward(ones({1, 3})), copy_head->forward(ones({1, 3}))));
}

TEST(CloneHostile, AModuleSharedByTwoPositionsIsSharedInTheCopy) {
  auto linear = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential net({linear, std::make_shared<nn::ReLU>(), linear});
  auto copy = std::dynamic_pointer_cast<nn::Sequential>(net.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ((*copy)[0].get(), (*copy)[2].get());
  EXPECT_NE((*copy)[0].get(), linear.get());
  EXPECT_EQ(copy->parameters().size(), 2u);
}

TEST(CloneHostile, AChildModuleSharedByTwoNamesStaysOneModuleInTheCopy) {
  // PyTorch: layer.norm2 = layer.norm1; copy.deepcopy(layer).norm2 is its norm1.
  nn::TransformerEncoderLayer layer(4, 2, 8, /*dropout=*/0.0);
  layer.norm2 = layer.register_module("norm2", layer.norm1);
  auto copy = std::dynamic_pointer_cast<nn::TransformerEncoderLayer>(layer.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->norm2.get(), copy->norm1.get());  // the member used by forward, too
  EXPECT_EQ(copy->named_children()["norm2"].get(), copy->norm1.get());
  EXPECT_NE(copy->norm1.get(), layer.norm1.get());
  EXPECT_EQ(copy->named_parameters().keys(), layer.named_parameters().keys());
}

TEST(CloneHostile, CloneLeavesTheRandomGeneratorAsItWas) {
  // PyTorch's deepcopy draws nothing: the numbers after it are those without it.
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Embedding>(4, 2),
      std::make_shared<nn::TransformerEncoderLayer>(4, 2, 8)});
  manual_seed(123);
  const Tensor expected = randn({6});
  manual_seed(123);
  auto copy = net->clone();
  EXPECT_EQ(values(randn({6})), values(expected));
  EXPECT_TRUE(same_values(copy->parameters().front(), net->parameters().front()));
}

TEST(CloneHostile, TrainingModesAndRequiresGradFollowTheOriginal) {
  nn::Sequential net({std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Dropout>(0.5)});
  net.eval();
  net[1]->train();
  net.parameters()[1].requires_grad_(false);
  auto copy = net.clone();
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE(std::dynamic_pointer_cast<nn::Sequential>(copy)->operator[](0)->is_training());
  EXPECT_TRUE(std::dynamic_pointer_cast<nn::Sequential>(copy)->operator[](1)->is_training());
  EXPECT_TRUE(copy->parameters()[0].requires_grad());
  EXPECT_FALSE(copy->parameters()[1].requires_grad());
}

// ---- item 8: in-place ops whose self is also an input ---------------------------------------------

constexpr const char* kOverlap =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation.";

TEST(InPlaceAliasing, ScatterAddRefusesSelfAsItsSource) {
  // PyTorch: t.scatter_add_(0, idx, t) -> RuntimeError (assert_no_overlap).
  Tensor t = tensor({1.0f, 2.0f, 3.0f});
  Tensor idx = tensor(std::vector<int64_t>{2, 1, 0});
  EXPECT_EQ(error_of<ValueError>([&] { t.scatter_add_(0, idx, t); }), kOverlap);
  EXPECT_EQ(values(t), (std::vector<float>{1, 2, 3}));  // unchanged
}

TEST(InPlaceAliasing, ScatterAddRefusesSelfAsItsIndex) {
  // PyTorch: u.scatter_add_(0, u, src) with u int64 -> RuntimeError (assert_no_overlap).
  Tensor u = tensor(std::vector<int64_t>{0, 1, 0});
  Tensor src = tensor(std::vector<int64_t>{5, 6, 7});
  EXPECT_EQ(error_of<ValueError>([&] { u.scatter_add_(0, u, src); }), kOverlap);
  EXPECT_EQ(u.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  Tensor view_of_u = u.view({3});  // another view of the same elements: the same refusal
  EXPECT_EQ(error_of<ValueError>([&] { u.scatter_add_(0, view_of_u, src); }), kOverlap);
}

TEST(InPlaceAliasing, IndexAddRefusesSelfAsItsSourceEvenWhenEmpty) {
  // PyTorch's get_overlap_status: one tensor passed twice is a full overlap, empty or not.
  Tensor e = zeros({0});
  EXPECT_EQ(error_of<ValueError>([&] { e.index_add_(0, zeros({0}, kInt64), e); }), kOverlap);
  Tensor t = tensor({1.0f, 2.0f});
  EXPECT_EQ(error_of<ValueError>([&] { t.index_add_(0, tensor(std::vector<int64_t>{1, 0}), t); }), kOverlap);
}

TEST(InPlaceAliasing, PointwiseOpsAllowTheFullAliasPyTorchAllows) {
  // PyTorch: a.add_(a) and a.copy_(a) are fine (assert_no_partial_overlap only); a
  // shifted view of a is refused.
  Tensor a = tensor({1.0f, 2.0f, 3.0f});
  a.add_(a);
  EXPECT_EQ(values(a), (std::vector<float>{2, 4, 6}));
  a.mul_(a);
  EXPECT_EQ(values(a), (std::vector<float>{4, 16, 36}));
  a.copy_(a);
  EXPECT_EQ(values(a), (std::vector<float>{4, 16, 36}));
  Tensor b = arange(4).to(kFloat32);
  Tensor head = b.slice(0, 0, 3), tail = b.slice(0, 1, 4);
  EXPECT_EQ(error_of<ValueError>([&] { head.add_(tail); }), kOverlap);
}

// ---- item 11: clip_grad --------------------------------------------------------------------------

TEST(ClipGradHostile, NormOfOrderZeroCountsGradientsWithANonZero) {
  // torch.nn.utils.clip_grad_norm_([p, q], 1.0, 0) with grads [3, -4, 0], [1, 0, 2]: 2.0,
  // grads scaled by 1 / (2 + 1e-6): [1.5, -2, 0], [0.5, 0, 1].
  Tensor p = zeros({3}).requires_grad_(), q = zeros({3}).requires_grad_();
  p.mutable_grad() = tensor({3.0f, -4.0f, 0.0f});
  q.mutable_grad() = tensor({1.0f, 0.0f, 2.0f});
  EXPECT_EQ(nn::utils::clip_grad_norm_({p, q}, 1.0, 0.0).item<float>(), 2.0f);
  const std::vector<float> gp = values(p.grad()), gq = values(q.grad());
  const std::vector<float> ep{1.5f, -2.0f, 0.0f}, eq{0.5f, 0.0f, 1.0f};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(gp[i], ep[i], 1e-6);
    EXPECT_NEAR(gq[i], eq[i], 1e-6);
  }
  // Across dtype groups too, and an all-zero gradient does not count: 2.
  Tensor r = zeros({2}, kFloat64).requires_grad_(), s = zeros({2}).requires_grad_();
  r.mutable_grad() = tensor({0.0, 5.0});
  s.mutable_grad() = zeros({2});
  p.mutable_grad() = tensor({3.0f, -4.0f, 0.0f});
  EXPECT_EQ(nn::utils::clip_grad_norm_({p, r, s}, 10.0, 0.0).item<double>(), 2.0);
}

TEST(ClipGradHostile, ClipValueNaNMakesGradientsNaN) {
  // torch.nn.utils.clip_grad_value_(p, float("nan")): clamp_(min=nan, max=nan) -> all NaN.
  Tensor p = zeros({3}).requires_grad_();
  p.mutable_grad() = tensor({1.0f, -2.0f, 0.0f});
  nn::utils::clip_grad_value_(p, std::nan(""));
  for (float g : values(p.grad())) EXPECT_TRUE(std::isnan(g));
}

// ---- item 12: attention rows masked whole, GELU at infinities ------------------------------------

TEST(AttentionHostile, RowMaskedWholeIsNaNInTheGradientToo) {
  // PyTorch 2.0-2.4's math path (convert_boolean_attn_mask, then softmax): a query row that
  // may attend to nothing is NaN in the output and in q.grad (MultiheadAttention agrees).
  Tensor q = (arange(6).to(kFloat32).reshape({3, 2}) * 0.1f).requires_grad_();
  Tensor k = (arange(8).to(kFloat32).reshape({4, 2}) * -0.2f).requires_grad_();
  Tensor v = (arange(8).to(kFloat32).reshape({4, 2}) * 0.3f).requires_grad_();
  Tensor mask = ones({3, 4}, kBool);
  mask.select(0, 1).fill_(false);
  Tensor out = F::scaled_dot_product_attention(q, k, v, mask);
  out.sum().backward();
  const std::vector<float> o = values(out), g = values(q.grad());
  for (int row = 0; row < 3; ++row) {
    for (int col = 0; col < 2; ++col) {
      EXPECT_EQ(std::isnan(o[row * 2 + col]), row == 1) << row << "," << col;
      EXPECT_EQ(std::isnan(g[row * 2 + col]), row == 1) << row << "," << col;
    }
  }
}

TEST(GeluHostile, TanhBackwardAtInfinitiesIsNaNAndFlatFarOut) {
  // F.gelu(x, approximate="tanh").sum().backward(), float32, x = [-inf, inf, -1e6, 1e6, -30,
  // 30, 1]: [nan, nan, 0, 1, 0, 1, 1.0829641].
  for (const char* approximate : {"tanh", "none"}) {
    Tensor x = tensor({-kInf, kInf, -1e6f, 1e6f, -30.0f, 30.0f, 1.0f}).requires_grad_();
    F::gelu(x, approximate).sum().backward();
    const std::vector<float> g = values(x.grad());
    EXPECT_TRUE(std::isnan(g[0])) << approximate;
    EXPECT_TRUE(std::isnan(g[1])) << approximate;
    EXPECT_EQ(g[2], 0.0f) << approximate;
    EXPECT_EQ(g[3], 1.0f) << approximate;
    EXPECT_EQ(g[4], 0.0f) << approximate;
    EXPECT_EQ(g[5], 1.0f) << approximate;
    EXPECT_NEAR(g[6], std::string(approximate) == "tanh" ? 1.0829641f : 1.0833154f, 2e-6) << approximate;
  }
}

TEST(GeluHostile, SharedFunctorOfTheDriverIsNaNAtInfinities) {
  // The body the CUDA kernels run (and the cpu's float64 path), called on the host.
  const detail::GeluBackwardFn<float> tanh_float{true};
  EXPECT_TRUE(std::isnan(tanh_float(1.0f, -kInf)));
  EXPECT_TRUE(std::isnan(tanh_float(1.0f, kInf)));
  EXPECT_EQ(tanh_float(1.0f, 1e6f), 1.0f);
  EXPECT_EQ(tanh_float(1.0f, -1e6f), 0.0f);
  const detail::GeluBackwardFn<float> exact_float{false};
  EXPECT_TRUE(std::isnan(exact_float(1.0f, -kInf)));
  EXPECT_TRUE(std::isnan(exact_float(1.0f, kNaN)));
}

// ---- item 19: what PyTorch accepts, and what PyTorch 2 refuses -----------------------------------

TEST(AcceptedSizes, LayerNormOfAnEmptyOrZeroShape) {
  // PyTorch: LayerNorm([]) builds (weight of shape []), its forward refuses; LayerNorm([0])
  // normalizes [2, 0] into [2, 0].
  nn::LayerNorm empty_shape(std::vector<int64_t>{});
  EXPECT_EQ(empty_shape.repr(), "LayerNorm((), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(empty_shape.weight.dim(), 0);
  // (A module's errors start with its repr, as ember's module context adds.)
  EXPECT_THROW_MSG(empty_shape.forward(randn({2, 3})), ValueError,
                   "): Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, "
                   "but got normalized_shape = []");
  nn::LayerNorm zero(std::vector<int64_t>{0});
  EXPECT_EQ(zero.repr(), "LayerNorm((0,), eps=1e-05, elementwise_affine=True)");
  Tensor x = zeros({2, 0}).requires_grad_();
  Tensor y = zero.forward(x);
  EXPECT_EQ(y.sizes(), (IntList{2, 0}));
  y.sum().backward();
  EXPECT_EQ(x.grad().sizes(), (IntList{2, 0}));
  EXPECT_EQ(error_of<ValueError>([] {
              nn::LayerNorm(std::vector<int64_t>{2, -1});
            }),
            "Trying to create tensor with negative dimension -1: [2, -1]");
}

TEST(AcceptedSizes, EmbeddingWithNoRows) {
  // PyTorch: Embedding(0, 4) has weight [0, 4] and looks up empty indices.
  nn::Embedding embedding(0, 4);
  EXPECT_EQ(embedding.repr(), "Embedding(0, 4)");
  EXPECT_EQ(embedding.weight.sizes(), (IntList{0, 4}));
  EXPECT_EQ(embedding.forward(zeros({0}, kInt64)).sizes(), (IntList{0, 4}));
  EXPECT_EQ(error_of<ValueError>([] { nn::Embedding(-1, 3); }),
            "Trying to create tensor with negative dimension -1: [-1, 3]");
  EXPECT_EQ(error_of<ValueError>([] { nn::Embedding(0, 3, 0); }), "Padding_idx must be within num_embeddings");
}

TEST(PyTorch2Refusals, Uint8AttentionMaskOfMultiheadAttention) {
  // PyTorch 1.13 warned and converted a uint8 attn_mask; PyTorch 2's _canonical_mask refuses
  // it ("only bool and floating types of attn_mask are supported").
  nn::MultiheadAttention attention(4, 2);
  Tensor x = randn({3, 1, 4});
  Tensor mask = zeros({3, 3}, kUInt8);
  EXPECT_THROW_MSG(attention.forward(x, x, x, {}, true, mask), TypeError,
                   "): only bool and floating types of attn_mask are supported");
}

TEST(PyTorch2Refusals, BaddbmmOfMixedDtypes) {
  // PyTorch 1.13 accepted float32 input with float64 batches; PyTorch 2's
  // TORCH_META_FUNC(baddbmm) refuses, printing the dtypes as C++ type names.
  const Tensor f32 = zeros({2, 2, 2}), f64 = zeros({2, 2, 2}, kFloat64);
  EXPECT_EQ(error_of<TypeError>([&] { baddbmm(f32, f64, f64); }),
            "Input dtypes must be the same, got: input float, batch1: double, batch2: double");
  EXPECT_EQ(error_of<TypeError>([&] { baddbmm(f64, f32, f32); }),
            "Input dtypes must be the same, got: input double, batch1: float, batch2: float");
  EXPECT_EQ(error_of<TypeError>([&] { baddbmm(f32, f32, f64); }), "expected scalar type Float but found Double");
}

}  // namespace
}  // namespace ember::testing
