// An emulated device larger than the host can back: when the host cannot provide the
// memory, the OutOfMemoryError says so instead of claiming the device has all its memory
// free; the device stays usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ember/ember.h"

// Emulated device memory comes from mmap, which never goes through the sanitizers'
// allocators; these keep any huge heap request a null return instead of a report.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }

namespace {

using namespace ember;

TEST(EmulatedHostOom, TheMessageSaysTheHostIsExhausted) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("EMBER_EMULATED_DEVICES");
  if (cuda::driver_is_available()) GTEST_SKIP() << "a GPU is present";
  cuda::emulate(1, size_t{1} << 50);       // 1 PiB: more than any host's address space can map
  const int64_t bytes = int64_t{1} << 48;  // 256 TiB: the device has room, the host does not
  try {
    empty({bytes}, TensorOptions(kUInt8).device("cuda:0"));
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    std::string message = e.what();
    EXPECT_EQ(
        message.rfind("CUDA out of memory. Tried to allocate 262144.00 GiB. GPU 0: the host memory that backs this "
                      "emulated device is exhausted (the host could not provide 281474976710656 bytes; the "
                      "device itself has 1125899906842624 of its 1125899906842624 bytes free).",
                      0),
        0u)
        << message;
    EXPECT_EQ(message.find("is free."), std::string::npos) << message;
  }
  // A request the host can back still works, and a device-side OOM keeps its message.
  EXPECT_EQ(full({4}, 3, TensorOptions(kFloat32).device("cuda:0")).sum().item<float>(), 12.0f);
  try {
    empty({int64_t{1} << 51}, TensorOptions(kUInt8).device("cuda:0"));
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU 0 has a total capacity of 1048576.00 GiB of which"), std::string::npos)
        << e.what();
  }
}

}  // namespace
