// Packed sequences (nn::utils::rnn) and the recurrent modules on them, against PyTorch 1.13
// (rnn_expected.h, float64; the packing example is the reference's, checked in 1.13); and
// every error of the recurrent family with PyTorch's wording, the module left usable.
#include "rnn_test_util.h"

namespace ember::testing {
namespace {

using namespace rnn_expected;
namespace rnn = nn::utils::rnn;

std::vector<int64_t> ints(const Tensor& t) { return t.cpu().to(kInt64).to_vector<int64_t>(); }

class Packed : public RnnCase {};

TEST_P(Packed, PackAndPadFollowTorchsExample) {
  Tensor seq = tensor({{1., 2., 0.}, {3., 0., 0.}, {4., 5., 6.}}, TensorOptions(kFloat64).device(dev_));
  rnn::PackedSequence p = rnn::pack_padded_sequence(seq, std::vector<int64_t>{2, 1, 3}, true, false);
  EXPECT_EQ(p.data().device(), dev_);
  EXPECT_EQ(p.data().to_vector<double>(), (std::vector<double>{4, 1, 3, 5, 2, 6}));
  EXPECT_TRUE(p.batch_sizes().device().is_cpu());
  EXPECT_EQ(p.batch_sizes().dtype(), kInt64);
  EXPECT_EQ(ints(p.batch_sizes()), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(ints(p.sorted_indices()), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(ints(p.unsorted_indices()), (std::vector<int64_t>{1, 2, 0}));
  auto [padded, lengths] = rnn::pad_packed_sequence(p, true);
  EXPECT_TRUE(equal(padded, seq));
  EXPECT_TRUE(lengths.device().is_cpu());
  EXPECT_EQ(ints(lengths), (std::vector<int64_t>{2, 1, 3}));
  auto [longer, unused] = rnn::pad_packed_sequence(p, false, -1.0, 4);
  EXPECT_EQ(longer.sizes(), (IntList{4, 3}));
  EXPECT_EQ(longer.to_vector<double>(), (std::vector<double>{1, 3, 4, 2, -1, 5, -1, -1, 6, -1, -1, -1}));
}

TEST_P(Packed, SortedPackingHasNoIndicesAndLengthsMayLiveOnADevice) {
  Tensor x = arange(12, TensorOptions(kFloat64).device(dev_)).view({4, 3});
  rnn::PackedSequence p = rnn::pack_padded_sequence(x, tensor({4, 2, 1}, TensorOptions(kInt64).device(dev_)));
  EXPECT_FALSE(p.sorted_indices().defined());
  EXPECT_FALSE(p.unsorted_indices().defined());
  EXPECT_EQ(p.data().to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 6, 9}));
  rnn::PackedSequence q =
      rnn::pack_sequence({x.narrow(1, 0, 1).reshape({4}), x.narrow(1, 1, 1).reshape({4}).narrow(0, 0, 2)});
  EXPECT_EQ(ints(q.batch_sizes()), (std::vector<int64_t>{2, 2, 1, 1}));
  Tensor padded = rnn::pad_sequence({x.narrow(0, 0, 1), x}, true, 7.0);
  EXPECT_EQ(padded.sizes(), (IntList{2, 4, 3}));
  EXPECT_EQ(padded[0][1].to_vector<double>(), (std::vector<double>{7, 7, 7}));
}

TEST_P(Packed, GradientsFlowThroughPackingAndPadding) {
  auto opts = TensorOptions(kFloat64).device(dev_).requires_grad(true);
  auto fn = [](const std::vector<Tensor>& in) {
    rnn::PackedSequence p = rnn::pack_padded_sequence(in[0], std::vector<int64_t>{1, 3, 2}, false, false);
    return std::vector<Tensor>{rnn::pad_packed_sequence(p, true, 0.5).first};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {randn({3, 3, 2}, opts)}));
}

TEST_P(Packed, LstmOnUnsortedLengthsMatchesPyTorch) {
  const Case& c = k_lstm_packed_unsorted;
  nn::LSTM m(3, 4, 1, true, false, 0.0, true);
  load(m, c);
  Tensor x = input(c, "x"), h0 = input(c, "h0"), c0 = input(c, "c0");
  rnn::PackedSequence p = rnn::pack_padded_sequence(x, value(c, "lengths").to(kInt64), false, false);
  auto [out, state] = m.forward(p, std::make_pair(h0, c0));
  EXPECT_TRUE(out.batch_sizes().is_same(p.batch_sizes()));
  Tensor padded = rnn::pad_packed_sequence(out, false, 0.0, 6).first;
  expect_matches(m, c, {{"out", padded}, {"h_n", state.first}, {"c_n", state.second}},
                 {{"x", x}, {"h0", h0}, {"c0", c0}});
}

TEST_P(Packed, GruOnSortedBatchFirstLengthsMatchesPyTorch) {
  const Case& c = k_gru_packed_sorted;
  nn::GRU m(3, 4, 2, true, true);
  load(m, c);
  Tensor x = input(c, "x");
  auto [out, h] = m.forward(rnn::pack_padded_sequence(x, value(c, "lengths").to(kInt64), true));
  Tensor padded = rnn::pad_packed_sequence(out, true, -1.0).first;
  expect_matches(m, c, {{"out", padded}, {"h_n", h}}, {{"x", x}});
}

TEST_P(Packed, EqualLengthsGiveThePaddedResult) {
  manual_seed(2);
  nn::RNN m(3, 4, 2, "tanh", true, false, 0.0, true);
  m.to(dev_, kFloat64);
  Tensor x = randn({5, 2, 3}, TensorOptions(kFloat64).device(dev_));
  auto [out, h] = m.forward(x);
  auto [packed, hp] = m.forward(rnn::pack_padded_sequence(x, std::vector<int64_t>{5, 5}));
  EXPECT_TRUE(allclose(rnn::pad_packed_sequence(packed).first, out, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(hp, h, 1e-12, 1e-12));
}

EMBER_ON_DEVICES(Packed, "cpu", "cuda:0");

TEST(PackedSequences, BadInputIsRefusedWithTorchsMessages) {
  Tensor x = randn({3, 2, 1});
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::pack_padded_sequence(x, std::vector<int64_t>{2, 3});
            }),
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you "
            "do not need ONNX exportability.");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::pack_padded_sequence(x, std::vector<int64_t>{2, 0});
            }),
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::pack_padded_sequence(x, std::vector<int64_t>{4, 1}, false, false);
            }),
            "Expected all lengths to be at most the padded sequence length 3, but found an element in 'lengths' "
            "that is 4");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::pack_padded_sequence(x, std::vector<int64_t>{2, 1, 1});
            }),
            "Expected `len(lengths)` to be equal to batch_size, but got 3 (batch_size=2)");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::pack_padded_sequence(randn({0, 2, 1}), std::vector<int64_t>{1, 1});
            }),
            "Cannot pack empty tensors.");
  EXPECT_EQ(error_of<ValueError>([&] { rnn::pack_padded_sequence(x, randn({2})); }),
            "'lengths' argument should be a 1D CPU int64 tensor, but got 1D cpu torch.float32 tensor");
  EXPECT_EQ(error_of<ValueError>([] { rnn::pad_sequence({}); }), "received an empty list of sequences");
  rnn::PackedSequence p = rnn::pack_padded_sequence(x, std::vector<int64_t>{3, 2});
  EXPECT_EQ(error_of<ValueError>([&] { rnn::pad_packed_sequence(p, false, 0.0, 2); }),
            "Expected total_length to be at least the length of the longest sequence in input, but got "
            "total_length=2 and max sequence length being 3");
}

// Hand-made packed sequences and sizes beyond memory: typed errors, never a write out of bounds,
// a std::bad_alloc or a process that grows until it is killed (PyTorch's invert_permutation
// reports "index 5 is out of bounds for dimension 0 with size 3"; its packing and padding
// allocate their results first and fail with "can't allocate memory").
TEST(PackedSequences, HandMadeAndHugeSequencesGetTypedErrors) {
  const Tensor data = randn({6, 3});
  EXPECT_EQ(error_of<IndexError>([&] {
              rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, 5, 1}));
            }),
            "index 5 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(error_of<IndexError>([&] {
              rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, 1, 2000000000}));
            }),
            "index 2000000000 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(error_of<IndexError>([&] {
              rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, -7, 1}));
            }),
            "index -7 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, 1, 1}));
            }),
            "sorted_indices is not a permutation: 1 appears twice");
  EXPECT_EQ(error_of<IndexError>([&] {
              rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({2, 0, -1}));
            }),
            "index -1 is out of bounds for dimension 0 with size 3");  // as PyTorch 1.13's
  // batch_sizes are checked against the data when a sequence is made: an RNN or a padding over
  // others would mix sequences or read past the data.
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::PackedSequence(data, tensor({1, 2, 3}));
            }),
            "PackedSequence: batch_sizes must be positive and non-increasing, but batch_sizes[1] is 2");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::PackedSequence(data, tensor({3, 0, 3}));
            }),
            "PackedSequence: batch_sizes must be positive and non-increasing, but batch_sizes[1] is 0");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::PackedSequence(data, tensor({3, 3, 3}));
            }),
            "PackedSequence: batch_sizes sum to more than the 6 rows of the packed data");
  EXPECT_EQ(error_of<ValueError>([&] { rnn::PackedSequence(data, tensor({int64_t{1} << 40})); }),
            "PackedSequence: batch_sizes sum to more than the 6 rows of the packed data");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn::PackedSequence(data, tensor({2, 1}));
            }),
            "PackedSequence: batch_sizes sum to 3, but the packed data has 6 rows");
  // A strided batch_sizes view is read through a contiguous copy that lives while it is read.
  const rnn::PackedSequence strided(data, tensor({int64_t{3}, 9, 2, 9, 1, 9}).slice(0, 0, 6, 2));
  EXPECT_EQ(rnn::pad_packed_sequence(strided).first.sizes(), (IntList{3, 3, 3}));
  nn::RNN rnn_module(3, 2);
  EXPECT_THROW(rnn_module.forward(rnn::PackedSequence(randn({3, 3}), tensor({1, 2}))), ValueError);
  EXPECT_EQ(
      error_of<IndexError>([&] {
        rnn::pad_packed_sequence(rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, 1, 2}), tensor({0, 9, 2})));
      }),
      "index 9 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(
      error_of<IndexError>([&] {
        rnn::pad_packed_sequence(rnn::PackedSequence(data, tensor({3, 2, 1}), tensor({0, 1, 2}), tensor({0, -1, 2})));
      }),
      "index -1 is out of bounds for dimension 0 with size 3");
  const rnn::PackedSequence fine(data, tensor({3, 2, 1}));
  EXPECT_THROW(rnn::pad_packed_sequence(fine, false, 0.0, int64_t{1} << 62),
               OutOfMemoryError);                                               // steps x batch overflows
  EXPECT_EQ(rnn::pad_packed_sequence(fine).first.sizes(), (IntList{3, 3, 3}));  // still usable
}

TEST(PackedSequences, SequencesBeyondMemoryGetTheAllocatorsError) {
  EMBER_SKIP_UNLESS_HUGE_ALLOCATIONS_FAIL();
  const rnn::PackedSequence fine(randn({6, 3}), tensor({3, 2, 1}));
  EXPECT_THROW(rnn::pad_packed_sequence(fine, false, 0.0, int64_t{1} << 40), OutOfMemoryError);
  // A broadcast batch of 2^40 sequences of one step: the padding's arrays cannot be allocated.
  const rnn::PackedSequence wide(randn({1, 1}).expand({int64_t{1} << 40, 1}), tensor({int64_t{1} << 40}));
  EXPECT_THROW(rnn::pad_packed_sequence(wide), OutOfMemoryError);
  // 2^40 steps of a broadcast input: the index of 2^40 rows (8 TiB) cannot be allocated.
  const Tensor endless = zeros({1, 1, 3}).expand({int64_t{1} << 40, 1, 3});
  EXPECT_THROW(rnn::pack_padded_sequence(endless, std::vector<int64_t>{int64_t{1} << 40}), OutOfMemoryError);
  nn::LSTM lstm(3, 4);
  EXPECT_THROW(lstm.forward(endless), OutOfMemoryError);
  nn::GRU gru(3, 4);
  EXPECT_THROW(gru.forward(endless), OutOfMemoryError);
  // 2^61 steps: past a host vector's max_size() (std::length_error, not std::bad_alloc).
  EXPECT_THROW(lstm.forward(zeros({1, 1, 3}).expand({int64_t{1} << 61, 1, 3})), OutOfMemoryError);
  EXPECT_EQ(lstm.forward(zeros({2, 1, 3})).first.sizes(), (IntList{2, 1, 4}));
}

TEST(PackedSequences, ToADeviceLeavesBatchSizesOnTheCpu) {
  ensure_cuda();
  rnn::PackedSequence p =
      rnn::pack_padded_sequence(randn({3, 2, 1}), std::vector<int64_t>{1, 3}, false, false).to(Device("cuda:0"));
  EXPECT_TRUE(p.is_cuda());
  EXPECT_TRUE(p.sorted_indices().is_cuda());
  EXPECT_TRUE(p.batch_sizes().device().is_cpu());
  EXPECT_EQ(error_of<ValueError>([] {
              rnn::PackedSequence(randn({2}), tensor({1, 1}).cuda());
            }).substr(0, 38),
            "batch_sizes should always be on CPU. I");
}

// ---- errors of the modules and cells ---------------------------------------------------------

TEST(RnnErrors, ConstructorsRefuseBadArgumentsWithTorchsMessages) {
  EXPECT_EQ(error_of<ValueError>([] { nn::LSTM(3, 4, 2, true, false, 1.5); }),
            "dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
  EXPECT_EQ(error_of<ValueError>([] { nn::LSTM(3, 4, 1, true, false, 0.0, false, 4); }),
            "proj_size has to be smaller than hidden_size");
  EXPECT_EQ(error_of<ValueError>([] { nn::LSTM(3, 4, 1, true, false, 0.0, false, -1); }),
            "proj_size should be a positive integer or zero to disable projections");
  EXPECT_EQ(error_of<ValueError>([] { nn::RNN(3, 4, 1, "gelu"); }),
            "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'.");
  EXPECT_EQ(error_of<ValueError>([] { nn::RNNCell(3, 4, true, "gelu"); }), "Unknown nonlinearity: gelu");
  EXPECT_EQ(error_of<ValueError>([] { nn::GRU(3, 0); }), "hidden_size must be greater than zero");
  EXPECT_EQ(error_of<ValueError>([] { nn::GRU(3, 4, 0); }), "num_layers must be greater than zero");
}

TEST(RnnErrors, ForwardRefusesBadInputAndStateWithTorchsMessages) {
  nn::LSTM lstm(3, 4);
  nn::RNN rnn_m(3, 4);
  nn::GRU gru(3, 4);
  nn::StateDict before;
  for (const auto& [key, p] : lstm.state_dict()) before.insert(key, p.clone());
  Tensor x = randn({5, 2, 3});
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(randn({1, 5, 2, 3}));
            }),
            "LSTM: Expected input to be 2D or 3D, got 4D instead");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn_m.forward(randn({1, 5, 2, 3}));
            }),
            "RNN: Expected input to be 2D or 3D, got 4D tensor instead");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(randn({5, 2, 7}));
            }),
            "input.size(-1) must be equal to input_size. Expected 3, got 7");
  EXPECT_EQ(error_of<ValueError>([&] { gru.forward(x.to(kFloat64)); }),
            "input must have the type torch.float32, got type torch.float64");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(x, randn({2, 2, 4}));
            }),
            "Expected hidden size (1, 2, 4), got [2, 2, 4]");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn_m.forward(x, randn({2, 4}));
            }),
            "For batched 3-D input, hx should also be 3-D but got 2-D tensor");
  EXPECT_EQ(error_of<ValueError>([&] {
              rnn_m.forward(randn({5, 3}), randn({1, 1, 4}));
            }),
            "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(x, std::make_pair(randn({1, 3, 4}), randn({1, 2, 4})));
            }),
            "Expected hidden[0] size (1, 2, 4), got [1, 3, 4]");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(x, std::make_pair(randn({1, 2, 4}), randn({1, 2, 5})));
            }),
            "Expected hidden[1] size (1, 2, 4), got [1, 2, 5]");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(x, std::make_pair(randn({2, 4}), randn({2, 4})));
            }),
            "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) tensors");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(randn({0, 2, 3}));
            }),
            "Expected sequence length to be larger than 0 in RNN");
  ensure_cuda();
  EXPECT_EQ(error_of<DeviceError>([&] {
              gru.forward(x, zeros({1, 2, 4}).cuda());
            }),
            "Input and hidden tensors are not at the same device, found input tensor at cpu and hidden tensor at "
            "cuda:0");
  // Nothing changed: the module still runs and its parameters are as before.
  auto [out, state] = lstm.forward(x);
  EXPECT_EQ(out.sizes(), (IntList{5, 2, 4}));
  for (const auto& [key, p] : lstm.state_dict()) EXPECT_TRUE(equal(p, before[key])) << key;
}

TEST(RnnErrors, CellsRefuseBadInputWithTorchsMessages) {
  nn::LSTMCell lstm(3, 4);
  nn::GRUCell gru(3, 4);
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(randn({1, 2, 3}));
            }),
            "LSTMCell: Expected input to be 1D or 2D, got 3D instead");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(randn({2, 3}), std::make_pair(randn({1, 2, 4}), randn({2, 4})));
            }),
            "LSTMCell: Expected hx[0] to be 1D or 2D, got 3D instead");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(randn({2, 5}));
            }),
            "input has inconsistent input_size: got 5 expected 3");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(randn({2, 3}), randn({3, 4}));
            }),
            "Input batch size 2 doesn't match hidden0 batch size 3");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(randn({2, 3}), randn({2, 5}));
            }),
            "hidden0 has inconsistent hidden_size: got 5, expected 4");
  EXPECT_EQ(error_of<ValueError>([&] {
              lstm.forward(randn({2, 3}), std::make_pair(randn({2, 4}), randn({3, 4})));
            }),
            "Input batch size 2 doesn't match hidden1 batch size 3");
  EXPECT_EQ(error_of<ValueError>([&] {
              gru.forward(randn({2, 3}), randn({1, 2, 4}));
            }),
            "GRUCell: Expected hidden to be 1D or 2D, got 3D instead");
}

TEST(RnnErrors, NanInAStatePropagates) {
  nn::GRU m(2, 3);
  Tensor h0 = zeros({1, 1, 3});
  h0.view({-1}).narrow(0, 0, 1).fill_(std::nan(""));
  auto [out, h] = m.forward(randn({2, 1, 2}), h0);
  EXPECT_TRUE(std::isnan(h.view({-1})[0].item<float>()));
}

}  // namespace
}  // namespace ember::testing
