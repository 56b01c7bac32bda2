// nn::ModuleDict (names nest as torch.nn.ModuleDict's) and weight tying: one parameter
// registered by two modules is listed and trained once and saved under both names, as
// PyTorch's `head.weight = embedding.weight`. Expected names are PyTorch 1.13's.
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

class Blocks : public nn::Module {
 public:
  Blocks() {
    layers = register_module("layers", std::make_shared<nn::ModuleDict>());
    layers->insert("proj", std::make_shared<nn::Linear>(2, 3));
    layers->insert("act", std::make_shared<nn::ReLU>());
    layers->insert("out", std::make_shared<nn::Linear>(3, 1, /*bias=*/false));
  }
  std::shared_ptr<nn::ModuleDict> layers;
};

TEST(NnModuleDict, NamesNestAsPyTorchs) {
  auto net = std::make_shared<Blocks>();
  // class B(nn.Module): layers = nn.ModuleDict({"proj": Linear(2, 3), "act": ReLU(), "out": Linear(3, 1, bias=False)})
  EXPECT_EQ(net->named_parameters().keys(),
            (std::vector<std::string>{"layers.proj.weight", "layers.proj.bias", "layers.out.weight"}));
  EXPECT_EQ(net->state_dict().keys(),
            (std::vector<std::string>{"layers.proj.weight", "layers.proj.bias", "layers.out.weight"}));
  EXPECT_EQ(net->layers->keys(), (std::vector<std::string>{"proj", "act", "out"}));
  EXPECT_TRUE(net->layers->contains("act"));
  EXPECT_FALSE(net->layers->contains("missing"));
  EXPECT_EQ(net->layers->size(), 3u);
  auto proj = std::dynamic_pointer_cast<nn::Linear>((*net->layers)["proj"]);
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->out_features, 3);
  EXPECT_EQ(net->layers->repr(),
            "ModuleDict(\n  (proj): Linear(in_features=2, out_features=3, bias=True)\n  (act): ReLU()\n"
            "  (out): Linear(in_features=3, out_features=1, bias=False)\n)");
}

TEST(NnModuleDict, InsertReplacesInPlaceAndBadKeysAreErrors) {
  nn::ModuleDict dict;
  dict.insert("a", std::make_shared<nn::Linear>(1, 1));
  dict.insert("b", std::make_shared<nn::ReLU>());
  auto replacement = std::make_shared<nn::Linear>(2, 2);
  dict.insert("a", replacement);
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(dict["a"].get(), replacement.get());
  EXPECT_EQ(dict.named_parameters().keys(), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_THROW_MSG(dict["c"], IndexError, "ModuleDict has no module 'c'");
  EXPECT_THROW_MSG(dict.insert("x.y", std::make_shared<nn::ReLU>()), ValueError, "module name can't contain \".\"");
  EXPECT_THROW_MSG(dict.insert("z", nullptr), ValueError, "module 'z' is null");
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"a", "b"}));  // unchanged by the refusals
  EXPECT_THROW_MSG(dict.forward(zeros({1})), Error, "is missing the required \"forward\" function");
}

TEST(NnModuleDict, CloneCopiesEveryModule) {
  auto net = std::make_shared<Blocks>();
  auto copy = std::dynamic_pointer_cast<nn::ModuleDict>(net->layers->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->keys(), net->layers->keys());
  auto a = std::dynamic_pointer_cast<nn::Linear>((*copy)["proj"]);
  EXPECT_TRUE(a->weight.equal(std::dynamic_pointer_cast<nn::Linear>((*net->layers)["proj"])->weight));
  EXPECT_FALSE(a->weight.is_same(std::dynamic_pointer_cast<nn::Linear>((*net->layers)["proj"])->weight));
}

TEST(NnWeightTying, OneParameterIsListedAndTrainedOnceAndSavedTwice) {
  auto enc = std::make_shared<nn::Linear>(3, 4, /*bias=*/false);
  auto head = std::make_shared<nn::Linear>(3, 4);
  nn::Module root;
  root.register_module("wte", enc);
  root.register_module("lm_head", head);
  head->weight = head->register_parameter("weight", enc->weight);  // PyTorch: lm_head.weight = wte.weight
  EXPECT_EQ(root.named_parameters().keys(), (std::vector<std::string>{"wte.weight", "lm_head.bias"}));
  EXPECT_EQ(root.parameters().size(), 2u);
  EXPECT_EQ(root.state_dict().keys(), (std::vector<std::string>{"wte.weight", "lm_head.weight", "lm_head.bias"}));
  {
    NoGradGuard no_grad;
    head->bias.zero_();
  }

  // Both uses add to one gradient; one SGD step moves the weight once by lr * that sum.
  Tensor w0 = enc->weight.detach().clone();
  Tensor x = tensor({{1.0f, 2.0f, 3.0f}});
  optim::SGD sgd(root.parameters(), optim::SGDOptions(0.1));
  Tensor loss = (enc->forward(x).sum() + head->forward(x).pow(2).sum());
  loss.backward();
  // d/dW sum(x W^T) = 1 x; d/dW sum((x W^T)^2) = 2 (x W^T)^T x
  Tensor y = x.matmul(w0.t());
  Tensor expected_grad = ones({4, 1}).matmul(x) + (y.t() * 2).matmul(x);
  EXPECT_TRUE(enc->weight.grad().allclose(expected_grad));
  sgd.step();
  EXPECT_TRUE(head->weight.is_same(enc->weight));
  EXPECT_TRUE(enc->weight.allclose(w0 - expected_grad * 0.1));

  // Loading a state dict writes both keys into the one tensor, as PyTorch's does.
  nn::StateDict state = root.state_dict();
  nn::StateDict changed;
  for (const auto& [key, t] : state) changed.insert(key, t.clone());
  changed["wte.weight"].fill_(3.0);
  changed["lm_head.weight"].fill_(3.0);
  root.load_state_dict(changed);
  EXPECT_TRUE(enc->weight.equal(full({4, 3}, 3.0)));
  EXPECT_TRUE(head->weight.is_same(enc->weight));
}

}  // namespace
}  // namespace ember
