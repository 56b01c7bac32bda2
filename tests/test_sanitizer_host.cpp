// The stream sanitizer through the public API, beyond stream against stream:
// - disjoint parts of one tensor written from two streams are not races (history by
//   byte ranges, Note [Access footprints] in sanitizer/race_detector.h);
// - the host touching pinned memory that a non_blocking copy still reads or writes,
//   and a block freed without record_stream while a side stream still reads it, are
//   (Notes [Host accesses], [Freed blocks]); each correctly synchronised version is not.
// Each racing call is refused before it runs, so the tests do not really race.
#include <gtest/gtest.h>

#include <vector>

#include "ember/ember.h"
#include "sanitizer_fixture.h"
#include "test_support.h"

namespace ember {
namespace {

using testing::hex;
using testing::Sanitizer;

TensorOptions on_cuda() { return TensorOptions().device(kCUDA); }

// ---- disjoint ranges -------------------------------------------------------------

TEST_F(Sanitizer, TwoStreamsWriteDisjointHalvesOfOneTensor) {
  cuda::Stream s1, s2;
  Tensor a = zeros({256}, on_cuda());
  s1.wait_stream(cuda::current_stream());
  s2.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s1);
    EXPECT_NO_THROW(a.narrow(0, 0, 128).fill_(1.0));
  }
  {
    cuda::StreamGuard guard(s2);
    EXPECT_NO_THROW(a.narrow(0, 128, 128).fill_(2.0));
    // s1's half is still unordered with s2.
    EXPECT_THROW_MSG((void)a.narrow(0, 120, 16).sum(), DataRaceError, "fill_\nwriting to argument: output");
  }
  cuda::current_stream().wait_stream(s1);
  cuda::current_stream().wait_stream(s2);
  EXPECT_EQ(a.sum().item<float>(), 128.0f + 256.0f);
}

TEST_F(Sanitizer, TwoStreamsWriteInterleavedElements) {
  cuda::Stream s1, s2;
  Tensor a = zeros({16, 16}, on_cuda());
  s1.wait_stream(cuda::current_stream());
  s2.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s1);
    EXPECT_NO_THROW(a.view({-1}).slice(0, 0, 256, 2).fill_(1.0));  // even elements
    EXPECT_NO_THROW(a.slice(1, 0, 16, 4).fill_(3.0));              // columns 0, 4, 8, 12: even too
  }
  {
    cuda::StreamGuard guard(s2);
    EXPECT_NO_THROW(a.view({-1}).slice(0, 1, 256, 2).fill_(2.0));  // odd elements
    EXPECT_THROW((void)a.select(1, 4).sum(), DataRaceError);       // column 4 is s1's
  }
  cuda::current_stream().wait_stream(s1);
  cuda::current_stream().wait_stream(s2);
  EXPECT_EQ(a.sum().item<float>(), 64.0f * 3.0f + 64.0f * 1.0f + 128.0f * 2.0f);
}

TEST_F(Sanitizer, AFlatBucketFilledFromTwoStreams) {
  // As a gradient bucket: each gradient copied into its slot on the stream that made it,
  // the bucket reduced after waiting for both.
  cuda::Stream s1, s2;
  Tensor bucket = zeros({10 + 300}, on_cuda());
  s1.wait_stream(cuda::current_stream());
  s2.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s1);
    Tensor g1 = full({10}, 1.0, on_cuda());
    EXPECT_NO_THROW(bucket.narrow(0, 0, 10).copy_(g1));
    g1.record_stream(s1);
  }
  {
    cuda::StreamGuard guard(s2);
    Tensor g2 = full({3, 100}, 2.0, on_cuda());
    EXPECT_NO_THROW(bucket.narrow(0, 10, 300).copy_(g2.view({-1})));
  }
  EXPECT_THROW((void)bucket.sum(), DataRaceError);  // not waited for yet
  cuda::current_stream().wait_stream(s1);
  cuda::current_stream().wait_stream(s2);
  EXPECT_EQ(bucket.sum().item<float>(), 10.0f + 600.0f);
}

// ---- the host and pinned memory --------------------------------------------------

TEST_F(Sanitizer, HostWriteToPinnedMemoryAPendingCopyReads) {
  cuda::Stream s;
  Tensor host = full({64}, 3.0).pin_memory();
  const void* pointer = host.data_ptr();  // no stream has touched it yet
  Tensor device = empty({64}, on_cuda());
  cuda::StreamGuard guard(s);
  device.copy_(host, /*non_blocking=*/true);  // reads `host` on s, later
  std::string message = testing::error_of<DataRaceError>([&] { host.fill_(5.0); });
  EXPECT_EQ(message.rfind("CSAN detected a possible data race on tensor with data pointer " + hex(pointer), 0), 0u)
      << message;
  EXPECT_NE(message.find("Access by the host during kernel:\nfill_\nwriting to argument: output\n"), std::string::npos)
      << message;
  EXPECT_NE(message.find("Previous access by stream "), std::string::npos) << message;
  EXPECT_NE(message.find("copy_ (host to device)\nreading from argument: source\n"), std::string::npos) << message;
  EXPECT_THROW_MSG((void)host.data_ptr(), DataRaceError, "data_ptr\nwriting to argument: self");
  EXPECT_NO_THROW((void)host.sum());  // reading what the copy reads is fine
  s.synchronize();
  EXPECT_NO_THROW(host.fill_(5.0));
  EXPECT_EQ(device.sum().item<float>(), 192.0f);  // the copy saw 3s
}

TEST_F(Sanitizer, HostWriteAfterAnEventOfTheCopyIsClean) {
  cuda::Stream s;
  Tensor host = full({64}, 3.0).pin_memory();
  Tensor device = empty({64}, on_cuda());
  cuda::Event copied;
  {
    cuda::StreamGuard guard(s);
    device.copy_(host, /*non_blocking=*/true);
    copied = s.record_event();
  }
  copied.synchronize();
  EXPECT_NO_THROW(host.data_ptr<float>()[0] = 7.0f);
  cuda::current_stream().wait_event(copied);
  EXPECT_EQ(device.sum().item<float>(), 192.0f);
}

TEST_F(Sanitizer, HostReadOfAPinnedDestinationBeforeTheCopyFinished) {
  Tensor device = full({64}, 2.0, on_cuda());
  Tensor host = empty({64}, TensorOptions().pinned_memory(true));
  host.copy_(device, /*non_blocking=*/true);  // writes `host` on the current stream, later
  EXPECT_THROW_MSG((void)host.sum(), DataRaceError,
                   "Access by the host during kernel:\nsum\nreading from argument: input");
  EXPECT_THROW_MSG((void)host.to_vector<float>(), DataRaceError,
                   "copy_ (device to host)\nwriting to argument: destination");
  EXPECT_THROW((void)host[3].item<float>(), DataRaceError);
  EXPECT_THROW((void)host.data_ptr(), DataRaceError);
  cuda::current_stream().synchronize();
  EXPECT_EQ(host.sum().item<float>(), 128.0f);
  EXPECT_EQ(host[3].item<float>(), 2.0f);
}

TEST_F(Sanitizer, HostReadOfAPinnedDestinationAfterAnEventIsClean) {
  Tensor device = full({64}, 2.0, on_cuda());
  Tensor host = empty({64}, TensorOptions().pinned_memory(true));
  host.copy_(device, /*non_blocking=*/true);
  cuda::current_stream().record_event().synchronize();
  EXPECT_EQ(host.to_vector<float>(), std::vector<float>(64, 2.0f));
}

TEST_F(Sanitizer, HostAccessesToPageableMemoryAreNotTracked) {
  Tensor device = full({64}, 2.0, on_cuda());
  Tensor host = empty({64});
  host.copy_(device, /*non_blocking=*/true);  // pageable: the copy is done when it returns
  EXPECT_EQ(host.sum().item<float>(), 128.0f);
}

// ---- a block freed without record_stream -------------------------------------------

// A tensor of the default stream read on `s`, then freed; returns its data pointer.
const void* read_on_side_stream_then_free(cuda::Stream& s, Tensor& result, bool record, bool wait_before_free) {
  Tensor a = full({256}, 1.0, on_cuda());
  const void* ptr = a.data_ptr();
  s.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s);
    result = a.mul(a);
    if (record) a.record_stream(s);
  }
  if (wait_before_free) cuda::current_stream().wait_stream(s);
  return ptr;
}

TEST_F(Sanitizer, ABlockFreedWithoutRecordStreamRacesWithItsNextUser) {
  cuda::Stream s;
  Tensor result;
  const void* first = read_on_side_stream_then_free(s, result, /*record=*/false, /*wait_before_free=*/false);
  Tensor again = empty({256}, on_cuda());
  ASSERT_EQ(again.data_ptr(), first) << "the caching allocator should hand the block out again";
  std::string message = testing::error_of<DataRaceError>([&] { again.fill_(0.0); });
  EXPECT_EQ(message.rfind("CSAN detected a possible data race on tensor with data pointer " + hex(first), 0), 0u)
      << message;
  EXPECT_NE(message.find("(default) on cuda:0 during kernel:\nfill_\nwriting to argument: output"), std::string::npos)
      << message;
  EXPECT_NE(message.find("during kernel:\nmul\nreading from argument: input"), std::string::npos) << message;
  s.synchronize();  // now nothing can still read the old tensor
  EXPECT_NO_THROW(again.fill_(0.0));
  cuda::current_stream().wait_stream(s);
  EXPECT_EQ(result.sum().item<float>(), 256.0f);
}

TEST_F(Sanitizer, ABlockFreedAfterRecordStreamOrAWaitIsClean) {
  for (bool record : {true, false}) {
    SCOPED_TRACE(record ? "record_stream" : "wait_stream before the free");
    cuda::Stream s;
    Tensor result;
    const void* first = read_on_side_stream_then_free(s, result, record, /*wait_before_free=*/!record);
    if (record) s.synchronize();  // lets the allocator's event complete, so the block is reused
    Tensor again = empty({256}, on_cuda());
    ASSERT_EQ(again.data_ptr(), first);
    EXPECT_NO_THROW(again.fill_(0.0));
    cuda::current_stream().wait_stream(s);
    EXPECT_EQ(result.sum().item<float>(), 256.0f);
  }
}

}  // namespace
}  // namespace ember
