// nn::Module: registries, traversal order, modes, to() keeping identity, state dicts
// with PyTorch's errors, and PyTorch's repr. Expected strings are PyTorch 1.13's
// (/usr/bin/python3), except ModuleList's folded repr, which is PyTorch 2's.
#include <gtest/gtest.h>

#include <sstream>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;

class Net : public nn::Module {
 public:
  Net() {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(1, 2, 3));
    seq = register_module("seq", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                     std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>()}));
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    steps = register_buffer("steps", zeros({}, kInt64));
    scale = register_buffer("scale", ones({2}));
    register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return fc->forward(seq->forward(x)); }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Sequential> seq;
  std::shared_ptr<nn::Linear> fc;
  Tensor steps, scale;
};

TEST(NnModule, NamedParametersAreDottedInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(net->named_parameters().keys(), (std::vector<std::string>{"conv.weight", "conv.bias", "seq.0.weight",
                                                                      "seq.0.bias", "fc.weight", "fc.bias"}));
  EXPECT_EQ(net->parameters().size(), 6u);
  EXPECT_TRUE(net->parameters()[4].is_same(net->fc->weight));
  EXPECT_TRUE(net->parameters(/*recurse=*/false).empty());
  EXPECT_EQ(net->named_buffers().keys(), (std::vector<std::string>{"steps", "scale", "scratch"}));
  EXPECT_EQ(net->named_children().keys(), (std::vector<std::string>{"conv", "seq", "fc"}));
  EXPECT_EQ(net->children().size(), 3u);
  EXPECT_EQ(net->named_modules().keys(), (std::vector<std::string>{"", "conv", "seq", "seq.0", "seq.1", "fc"}));
  EXPECT_EQ(net->named_modules()[""].get(), net.get());
  EXPECT_EQ(net->modules().size(), 6u);
}

TEST(NnModule, SharedParametersAndModulesAreListedOnceButSavedUnderEveryName) {
  nn::Module root;  // on the stack: traversal still works
  auto shared = std::make_shared<nn::Linear>(2, 2);
  root.register_module("a", shared);
  root.register_module("b", shared);
  root.register_parameter("tied", shared->weight);
  EXPECT_EQ(root.named_modules().keys(), (std::vector<std::string>{"", "a"}));
  EXPECT_EQ(root.named_parameters().keys(), (std::vector<std::string>{"tied", "a.bias"}));
  EXPECT_EQ(root.state_dict().keys(), (std::vector<std::string>{"tied", "a.weight", "a.bias", "b.weight", "b.bias"}));
}

TEST(NnModule, RegistrationNamesFollowPyTorch) {
  nn::Module m;
  EXPECT_EQ(error_of<ValueError>([&] { m.register_parameter("a.b", ones({1})); }),
            "parameter name can't contain \".\"");
  EXPECT_EQ(error_of<ValueError>([&] { m.register_buffer("", ones({1})); }), "buffer name can't be empty string \"\"");
  EXPECT_EQ(error_of<ValueError>([&] { m.register_module("a.b", std::make_shared<nn::ReLU>()); }),
            "module name can't contain \".\", got: a.b");
  m.register_buffer("b", ones({1}));
  EXPECT_EQ(error_of<ValueError>([&] { m.register_parameter("b", ones({1})); }), "attribute 'b' already exists");
  // Registering a parameter again under its name replaces it in place.
  m.register_parameter("w", ones({1}));
  m.register_parameter("v", ones({1}));
  m.register_parameter("w", zeros({3}));
  EXPECT_EQ(m.named_parameters().keys(), (std::vector<std::string>{"w", "v"}));
  EXPECT_EQ(m.named_parameters()["w"].numel(), 3);
  // An absent parameter (bias=None) is listed nowhere.
  m.register_parameter("none", Tensor());
  EXPECT_EQ(m.state_dict().keys(), (std::vector<std::string>{"w", "v", "b"}));
}

TEST(NnModule, TrainAndEvalReachEveryDescendant) {
  auto net = std::make_shared<Net>();
  EXPECT_TRUE(net->is_training());
  net->eval();
  for (const auto& m : net->modules()) EXPECT_FALSE(m->is_training());
  net->train();
  EXPECT_TRUE((*net->seq)[1]->is_training());
}

TEST(NnModule, ForwardIsRequiredAndCallOperatorRunsIt) {
  nn::Module m;
  EXPECT_EQ(error_of<Error>([&] { m(ones({1})); }), "Module [Module] is missing the required \"forward\" function");
  nn::ModuleList list;
  EXPECT_EQ(error_of<Error>([&] { list(ones({1})); }),
            "Module [ModuleList] is missing the required \"forward\" function");
  auto net = std::make_shared<Net>();
  EXPECT_EQ((*net)(ones({5, 4})).sizes(), (IntList{5, 2}));
}

void expect_on(const nn::Module& m, Device device) {
  for (const auto& [name, t] : m.named_parameters()) EXPECT_EQ(t.device(), device) << name;
  for (const auto& [name, t] : m.named_buffers()) EXPECT_EQ(t.device(), device) << name;
}

TEST(NnModule, ToDeviceKeepsEveryParameterTheSameTensor) {
  ember::testing::ensure_cuda();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 devices";
  auto net = std::make_shared<Net>();
  const std::vector<Tensor> before = net->parameters();
  const std::vector<float> weights = net->fc->weight.to_vector<float>();
  Tensor held = net->fc->weight;  // as an optimizer holds it
  nn::Module& same = net->to("cuda:1", /*non_blocking=*/true);
  EXPECT_EQ(&same, net.get());
  expect_on(*net, Device("cuda:1"));
  const std::vector<Tensor> after = net->parameters();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].is_same(after[i]));
  EXPECT_EQ(held.device(), Device("cuda:1"));
  EXPECT_EQ(held.to_vector<float>(), weights);
  EXPECT_EQ(net->steps.device(), Device("cuda:1"));  // buffers move too
  EXPECT_EQ((*net)(ones({5, 4}, "cuda:1")).device(), Device("cuda:1"));
  net->to(Device(kCPU));
  expect_on(*net, Device(kCPU));
  EXPECT_EQ(held.to_vector<float>(), weights);
}

TEST(NnModule, ToDTypeCastsOnlyFloatingTensors) {
  auto net = std::make_shared<Net>();
  Tensor held = net->conv->weight;
  const std::vector<float> weights = held.to_vector<float>();
  net->to(kFloat64);
  EXPECT_EQ(held.dtype(), kFloat64);
  EXPECT_EQ(net->scale.dtype(), kFloat64);
  EXPECT_EQ(net->steps.dtype(), kInt64);
  const std::vector<double> widened = held.to_vector<double>();
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(widened[i], static_cast<double>(weights[i]));
  EXPECT_EQ(error_of<TypeError>([&] { net->to(kInt64); }),
            "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=torch.int64");
  EXPECT_EQ(held.dtype(), kFloat64);
}

TEST(NnModule, StateDictHoldsParametersThenPersistentBuffersSharingStorage) {
  auto net = std::make_shared<Net>();
  nn::StateDict sd = net->state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"steps", "scale", "conv.weight", "conv.bias", "seq.0.weight",
                                                 "seq.0.bias", "fc.weight", "fc.bias"}));
  EXPECT_EQ(sd["fc.weight"].data_ptr(), net->fc->weight.data_ptr());
  EXPECT_FALSE(sd["fc.weight"].is_same(net->fc->weight));
}

TEST(NnModule, LoadStateDictCopiesValuesAcrossDTypes) {
  auto a = std::make_shared<Net>();
  auto b = std::make_shared<Net>();
  b->to(kFloat64);
  NoGradGuard no_grad;
  b->fc->weight.fill_(0.5);
  b->steps.fill_(7);
  nn::LoadStateDictResult result = a->load_state_dict(b->state_dict());
  EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty());
  EXPECT_EQ(a->fc->weight.dtype(), kFloat32);
  EXPECT_EQ(a->fc->weight.to_vector<float>(), std::vector<float>(6, 0.5f));
  EXPECT_EQ(a->steps.item<int64_t>(), 7);
  EXPECT_TRUE(a->conv->weight.to(kFloat64).equal(b->conv->weight));
}

TEST(NnModule, LoadStateDictErrorsAreThoseOfPyTorchAndChangeNothing) {
  auto net = std::make_shared<Net>();
  const nn::StateDict before = net->state_dict();
  std::vector<std::vector<float>> values;
  for (const Tensor& p : net->parameters()) values.push_back(p.to_vector<float>());

  nn::StateDict sd;
  for (const auto& [key, t] : before) sd.insert(key, zeros_like(t));
  sd.erase("conv.bias");
  sd.insert("extra", zeros({1}));
  sd.insert("fc.weight", zeros({2, 5}));
  EXPECT_EQ(error_of<ValueError>([&] { net->load_state_dict(sd); }),
            "Error(s) in loading state_dict for Net:\n"
            "\tMissing key(s) in state_dict: \"conv.bias\". \n"
            "\tUnexpected key(s) in state_dict: \"extra\". \n"
            "\tsize mismatch for fc.weight: copying a param with shape [2, 5] from checkpoint, the shape in current "
            "model is [2, 3].");
  // Nothing was copied, not even the parameters that matched.
  std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].to_vector<float>(), values[i]);

  // Non-strict: keys are reported, not errors; a size mismatch still is one.
  nn::StateDict partial;
  for (const auto& [key, t] : before) {
    if (key != "fc.bias") partial.insert(key, zeros_like(t));
  }
  partial.insert("x.y", ones({1}));
  nn::LoadStateDictResult result = net->load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"fc.bias"});
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"x.y"});
  EXPECT_EQ(net->fc->weight.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(net->fc->bias.to_vector<float>(), values[5]);
}

TEST(NnModule, ReprIsPyTorchs) {
  std::ostringstream out;
  out << Net();
  EXPECT_EQ(out.str(),
            "Net(\n"
            "  (conv): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1))\n"
            "  (seq): Sequential(\n"
            "    (0): Linear(in_features=4, out_features=3, bias=True)\n"
            "    (1): ReLU()\n"
            "  )\n"
            "  (fc): Linear(in_features=3, out_features=2, bias=True)\n"
            ")");
  EXPECT_EQ(nn::Linear(3, 4, false).repr(), "Linear(in_features=3, out_features=4, bias=False)");
  EXPECT_EQ(nn::Conv2d(2, 4, {3, 5}, 2, 1, 2, 2, false).repr(),
            "Conv2d(2, 4, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), groups=2, bias=False)");
  EXPECT_EQ(nn::Sigmoid().repr(), "Sigmoid()");
  EXPECT_EQ(nn::Tanh().repr(), "Tanh()");
  EXPECT_EQ(nn::Flatten().repr(), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(nn::Sequential().repr(), "Sequential()");
  EXPECT_EQ(nn::ModuleList().repr(), "ModuleList()");
  nn::ModuleList list{std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Linear>(2, 2),
                      std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::Sequential>(
                          std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Tanh>()})};
  EXPECT_EQ(list.repr(),
            "ModuleList(\n"
            "  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n"
            "  (2): ReLU()\n"
            "  (3): Sequential(\n"
            "    (0): Tanh()\n"
            "  )\n"
            ")");
}

TEST(NnModule, CloneIsDeepAndKeepsTheMode) {
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::ReLU>()});
  net->eval();
  auto copy = std::dynamic_pointer_cast<nn::Sequential>(net->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->repr(), net->repr());
  EXPECT_FALSE((*copy)[0]->is_training());
  auto original = std::dynamic_pointer_cast<nn::Linear>((*net)[0]);
  auto cloned = std::dynamic_pointer_cast<nn::Linear>((*copy)[0]);
  EXPECT_TRUE(cloned->weight.equal(original->weight));
  EXPECT_NE(cloned->weight.data_ptr(), original->weight.data_ptr());
  EXPECT_TRUE(cloned->named_parameters()["weight"].is_same(cloned->weight));  // members stay bound
  EXPECT_EQ(error_of<Error>([] { Net().clone(); }),
            "clone() is not implemented for Net; the built-in modules implement it, a custom module may override it");
}

TEST(NnModule, SequentialIndexingAndApply) {
  nn::Sequential seq{std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::ReLU>()};
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[-1]->name(), "ReLU");
  EXPECT_EQ(error_of<IndexError>([&] { seq[2]; }), "index 2 is out of range for a Sequential of 2 modules");
  std::vector<std::string> visited;
  seq.apply([&](nn::Module& m) { visited.push_back(m.name()); });
  EXPECT_EQ(visited, (std::vector<std::string>{"Linear", "ReLU", "Sequential"}));
}

}  // namespace
}  // namespace ember
