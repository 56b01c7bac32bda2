// Peer access to expandable segments on emulated devices (issue 41, finding 4; Note
// [Emulated peer access]): cudaDeviceEnablePeerAccess does not cover cuMemMap'ed memory,
// each range needs cuMemSetAccess for each peer, at map time for ranges mapped after peer
// access was enabled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "ember/ember.h"
#include "ember/errors.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool configured =
    (setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1), ember::cuda::emulate(2, 256 * MiB), true);

ember::TensorOptions on(int device) { return ember::TensorOptions().device(ember::Device(ember::kCUDA, device)); }

TEST(EmulatedPeerAccess, SegmentsMappedAfterPeerAccessWasEnabledAreGrantedToo) {
  ASSERT_TRUE(configured);
  ember::Tensor first = ember::full({1024}, 1.0, on(1));
  // The first copy between the devices enables peer access and grants what is mapped now.
  EXPECT_EQ(first.to(ember::Device(ember::kCUDA, 0)).cpu().to_vector<float>(), std::vector<float>(1024, 1.0f));
  // 8 MiB more: the copy's destination maps new pages of cuda:0's expandable segments,
  // which the copying device (cuda:1, the source's stream) may touch only with a grant
  // made at map time. Without it: "an illegal memory access was encountered".
  ember::Tensor later = ember::full({2 << 20}, 2.0, on(1));
  ember::Tensor copied = later.to(ember::Device(ember::kCUDA, 0));
  EXPECT_EQ(copied.sum().item<float>(), float(2 << 20) * 2.0f);
}

}  // namespace
