// The stream sanitizer sees gloo's collectives on emulated cuda tensors: each runs as a
// host task on the group's stream with its operands declared (Note [Collectives as stream
// work] in src/distributed/process_group_gloo.cpp), so a collective's output read on
// another stream without a wait, or its input written on another stream it did not wait
// for, is a DataRaceError, as a kernel's would be. A world of one rank, in this process.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ember/ember.h"
#include "sanitizer_fixture.h"

namespace ember {
namespace {

namespace dist = ember::distributed;
using namespace std::chrono_literals;
using CollectiveSanitizer = testing::Sanitizer;

/// A gloo group of one rank (port 0: rank 0 serves the store on a free port).
class OneRankGroup {
 public:
  OneRankGroup() {
    dist::init_process_group("gloo",
                             dist::InitOptions().init_method("tcp://127.0.0.1:0").rank(0).world_size(1).timeout(30s));
  }
  ~OneRankGroup() { dist::destroy_process_group(); }
};

TEST_F(CollectiveSanitizer, AllReduceOutputReadOnAnotherStreamWithoutAWaitRaces) {
  EMBER_REQUIRE_EMULATED();  // gloo serves emulated cuda tensors
  cuda::Stream other(0);     // before the group takes its stream from the pool
  OneRankGroup group;
  Tensor t = full({64}, 2.0, TensorOptions().device(kCUDA));
  dist::all_reduce(t);  // blocking: the current stream waits for the collective
  {
    cuda::StreamGuard guard(other);
    std::string message = testing::error_of<DataRaceError>([&] { (void)sum(t); });
    EXPECT_NE(message.find("all_reduce\nwriting to argument: output"), std::string::npos) << message;
  }
  other.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(other);
    EXPECT_EQ(sum(t).item<float>(), 128.0f);
  }
  EXPECT_EQ(t.sum().item<float>(), 128.0f);  // the current stream is ordered after it
}

TEST_F(CollectiveSanitizer, AllGatherOutputsAreWrites) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream other(0);
  OneRankGroup group;
  Tensor input = full({8}, 3.0, TensorOptions().device(kCUDA));
  std::vector<Tensor> outputs{zeros({8}, TensorOptions().device(kCUDA))};
  dist::all_gather(outputs, input);
  cuda::StreamGuard guard(other);
  std::string message = testing::error_of<DataRaceError>([&] { outputs[0].fill_(1.0); });
  EXPECT_NE(message.find("all_gather\nwriting to argument: output"), std::string::npos) << message;
}

TEST_F(CollectiveSanitizer, AllReduceOfATensorAnotherStreamWritesRaces) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream other(0);
  OneRankGroup group;
  Tensor t = zeros({64}, TensorOptions().device(kCUDA));
  other.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(other);
    t.fill_(1.0);  // the current stream does not wait for this
  }
  testing::drain_unseen();  // the race stays logical: the fill has run
  std::string message = testing::error_of<DataRaceError>([&] { dist::all_reduce(t); });
  EXPECT_NE(message.find("fill_\nwriting to argument: output"), std::string::npos) << message;
  // The refused collective ran nowhere; the group still works once the streams are ordered.
  cuda::current_stream().wait_stream(other);
  dist::all_reduce(t);
  EXPECT_EQ(t.sum().item<float>(), 64.0f);
}

}  // namespace
}  // namespace ember
