// Handles of the public API used after a move: each is a valid value or throws a clear
// ember::Error, never a crash.
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/stream_state.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::Tensor;

namespace {

// Guards are neither copyable nor movable, so they cannot be moved from.
static_assert(!std::is_move_constructible_v<cuda::DeviceGuard> && !std::is_move_assignable_v<cuda::DeviceGuard>);
static_assert(!std::is_move_constructible_v<cuda::StreamGuard> && !std::is_move_assignable_v<cuda::StreamGuard>);

TEST(MovedFromHandles, StreamIsStillTheStream) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::Stream a(1);
  cuda::Stream b = std::move(a);
  EXPECT_EQ(a, b);  // NOLINT(bugprone-use-after-move): a Stream is a value, like c10::Stream
  EXPECT_EQ(a.device(), ember::Device("cuda:1"));
  EXPECT_EQ(a.device_index(), 1);
  EXPECT_EQ(a.id(), b.id());
  (void)a.query();
  a.synchronize();
  std::ostringstream out, expected;
  out << a;
  expected << b;
  EXPECT_EQ(out.str(), expected.str());
  cuda::Stream c(1);
  c = std::move(b);
  EXPECT_EQ(b, c);  // NOLINT(bugprone-use-after-move)
  b.wait_stream(cuda::Stream(1));
  cuda::Stream(1).wait_stream(b);
  {
    cuda::StreamGuard guard(b);
    EXPECT_EQ(cuda::current_stream(), a);
  }
  cuda::Event e;
  e.record(b);
  e.synchronize();
  cuda::set_stream(b);
  EXPECT_EQ(cuda::current_stream(1), a);
  cuda::set_stream(cuda::default_stream(1));
  cuda::set_device(0);
  EXPECT_THROW_MSG(cuda::Stream(std::shared_ptr<ember::detail::StreamState>()), ember::ValueError,
                   "cuda::Stream: the stream state is null");
}

TEST(MovedFromHandles, EventIsAnUnrecordedEvent) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Event a(/*enable_timing=*/true);
  a.record();
  cuda::Event b = std::move(a);
  EXPECT_TRUE(b.is_recorded());
  EXPECT_FALSE(a.is_recorded());  // NOLINT(bugprone-use-after-move): as a new event
  EXPECT_EQ(a.device_index(), -1);
  EXPECT_TRUE(a.query());
  a.synchronize();
  a.wait();
  EXPECT_THROW_MSG((void)a.elapsed_time(b), ember::ValueError,
                   "Both events must be recorded before calculating elapsed time.");
  a.record(cuda::Stream(0));
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(a.is_recorded());
}

TEST(MovedFromHandles, TensorIsUndefinedAndThrows) {
  Tensor a = ember::ones({2, 2});
  Tensor b = std::move(a);
  EXPECT_FALSE(a.defined());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(b.defined());
  const Tensor& u = a;
  Tensor ok = ember::ones({2, 2});
  std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"sizes", [&] { (void)u.sizes(); }},
      {"numel", [&] { (void)u.numel(); }},
      {"nbytes", [&] { (void)u.nbytes(); }},
      {"element_size", [&] { (void)u.element_size(); }},
      {"is_cuda", [&] { (void)u.is_cuda(); }},
      {"is_pinned", [&] { (void)u.is_pinned(); }},
      {"options", [&] { (void)u.options(); }},
      {"data_ptr", [&] { (void)u.data_ptr(); }},
      {"item", [&] { (void)u.item<float>(); }},
      {"to_vector", [&] { (void)u.to_vector<float>(); }},
      {"to", [&] { (void)u.to(ember::kFloat64); }},
      {"cpu", [&] { (void)u.cpu(); }},
      {"clone", [&] { (void)u.clone(); }},
      {"contiguous", [&] { (void)u.contiguous(); }},
      {"copy_ into", [&] { (void)a.copy_(ok); }},
      {"copy_ from", [&] { (void)ok.clone().copy_(u); }},
      {"view", [&] { (void)u.view({4}); }},
      {"reshape", [&] { (void)u.reshape({4}); }},
      {"t", [&] { (void)u.t(); }},
      {"select", [&] { (void)u.select(0, 0); }},
      {"slice", [&] { (void)u.slice(0, 0, 1); }},
      {"narrow", [&] { (void)u.narrow(0, 0, 1); }},
      {"unsqueeze", [&] { (void)u.unsqueeze(0); }},
      {"squeeze", [&] { (void)u.squeeze(0); }},
      {"expand",
       [&] {
         (void)u.expand({2, 2});
       }},
      {"as_strided", [&] { (void)u.as_strided({1}, {1}, 0); }},
      {"neg", [&] { (void)u.neg(); }},
      {"add lhs", [&] { (void)u.add(ok); }},
      {"add rhs", [&] { (void)ok.add(u); }},
      {"add_ rhs", [&] { (void)ok.clone().add_(u); }},
      {"eq scalar", [&] { (void)u.eq(1); }},
      {"sum", [&] { (void)u.sum(); }},
      {"max dim", [&] { (void)u.max(0); }},
      {"matmul", [&] { (void)ok.matmul(u); }},
      {"index_select", [&] { (void)ok.index_select(0, u); }},
      {"allclose", [&] { (void)ok.allclose(u); }},
      {"equal", [&] { (void)u.equal(ok); }},
      {"fill_", [&] { (void)a.fill_(1); }},
      {"zero_", [&] { (void)a.zero_(); }},
      {"uniform_", [&] { (void)a.uniform_(); }},
      {"operator+=", [&] { a += 1; }},
      {"new_zeros", [&] { (void)u.new_zeros({1}); }},
      {"empty_like", [&] { (void)ember::empty_like(u); }},
      {"pin_memory", [&] { (void)u.pin_memory(); }},
  };
  for (auto& [name, call] : calls) {
    std::string message = ember::testing::error_of<ember::Error>(call);
    EXPECT_NE(message.find("defined"), std::string::npos)
        << name << ": " << message;  // "undefined" or "must be defined"
  }
  EXPECT_FALSE(a.defined());
  std::ostringstream out;
  out << u;
  EXPECT_EQ(out.str(), "[ Tensor (undefined) ]");  // PyTorch's print of an undefined tensor
  a = ember::zeros({1});                           // assigning makes it usable again
  EXPECT_EQ(a.item<float>(), 0.0f);
}

TEST(MovedFromHandles, FFTPlanCacheIsStillTheDevicesCache) {
  EMBER_REQUIRE_DEVICES(1);
  ember::backends::cuda::FFTPlanCache a = ember::backends::cuda::cufft_plan_cache[0];
  ember::backends::cuda::FFTPlanCache b = std::move(a);
  EXPECT_EQ(a.size(), b.size());  // NOLINT(bugprone-use-after-move): a value naming a device
  EXPECT_EQ(a.max_size(), b.max_size());
}

}  // namespace
