// Device parsing, printing, equality and hashing against c10::Device's rules.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <unordered_set>

#include "ember/device.h"
#include "ember/errors.h"

namespace ember {
namespace {

// The message of the ValueError that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text) {
  try {
    Device device(text);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(Device, ParsesTypeAndIndex) {
  Device cuda("cuda");
  EXPECT_EQ(cuda.type(), kCUDA);
  EXPECT_EQ(cuda.index(), -1);
  EXPECT_FALSE(cuda.has_index());
  EXPECT_TRUE(cuda.is_cuda());
  EXPECT_FALSE(cuda.is_cpu());

  Device cuda12("cuda:12");
  EXPECT_EQ(cuda12.type(), kCUDA);
  EXPECT_EQ(cuda12.index(), 12);
  EXPECT_TRUE(cuda12.has_index());

  EXPECT_EQ(Device("cuda:0").index(), 0);
  Device cpu("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_EQ(cpu.index(), -1);
  // PyTorch accepts an explicit index 0 for the cpu.
  EXPECT_EQ(Device("cpu:0").index(), 0);
  EXPECT_EQ(Device("cpu:0").str(), "cpu:0");
}

TEST(Device, ImplicitFromStrings) {
  auto index_of = [](const Device& d) { return d.index(); };
  EXPECT_EQ(index_of("cuda:3"), 3);
  EXPECT_EQ(index_of(std::string("cuda:4")), 4);
  EXPECT_EQ(index_of(std::string_view("cuda:5")), 5);
}

TEST(Device, EmptyString) { EXPECT_EQ(parse_error(""), "Device string must not be empty"); }

TEST(Device, MalformedStringsQuoteTheWholeString) {
  for (std::string text : {"cuda:", "cuda:-1", "cuda:01", "cuda:00", "cuda: 1", "cuda:1 ", " cuda", "cuda0", "cuda:0:1",
                           ":0", ":", "1", "cuda:+1", "cu-da", "cuda:1a", "cuda::1"}) {
    EXPECT_EQ(parse_error(text), "Invalid device string: '" + text + "'") << text;
  }
}

TEST(Device, UnknownTypeNamesTheType) {
  EXPECT_EQ(parse_error("gpu"), "Expected one of cpu, cuda device type at start of device string: gpu");
  EXPECT_EQ(parse_error("gpu:0"), "Expected one of cpu, cuda device type at start of device string: gpu");
  // Types are case-sensitive, as in PyTorch.
  EXPECT_EQ(parse_error("CUDA"), "Expected one of cpu, cuda device type at start of device string: CUDA");
  EXPECT_EQ(parse_error("Cpu:0"), "Expected one of cpu, cuda device type at start of device string: Cpu");
}

TEST(Device, IndexRangeChecks) {
  EXPECT_EQ(parse_error("cpu:1"), "CPU device index must be -1 or zero, got 1");
  EXPECT_EQ(parse_error("cuda:99999999999"),
            "Could not parse device index '99999999999' in device string 'cuda:99999999999'");
  EXPECT_EQ(Device("cuda:32767").index(), 32767);

  try {
    Device(kCPU, 1);
    FAIL() << "Device(kCPU, 1) did not throw";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "CPU device index must be -1 or zero, got 1");
  }
  try {
    Device(kCUDA, -2);
    FAIL() << "Device(kCUDA, -2) did not throw";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "Device index must be -1 or non-negative, got -2");
  }
  EXPECT_THROW(Device(kCUDA, 40000), ValueError);
  EXPECT_EQ(Device(kCPU, 0).index(), 0);
  EXPECT_EQ(Device(kCUDA, 7).index(), 7);
}

TEST(Device, ErrorsAreEmberErrors) { EXPECT_THROW(Device("gpu"), Error); }

TEST(Device, StrAndRepr) {
  EXPECT_EQ(Device("cuda:1").str(), "cuda:1");
  EXPECT_EQ(Device("cuda").str(), "cuda");
  EXPECT_EQ(Device("cpu").str(), "cpu");
  EXPECT_EQ(Device("cuda:1").repr(), "device(type='cuda', index=1)");
  EXPECT_EQ(Device("cuda").repr(), "device(type='cuda')");
  EXPECT_EQ(Device("cpu").repr(), "device(type='cpu')");
  EXPECT_EQ(Device("cpu:0").repr(), "device(type='cpu', index=0)");
}

TEST(Device, StreamOutput) {
  std::ostringstream out;
  out << Device("cuda:2") << " " << Device(kCPU) << " " << kCUDA << " " << kCPU;
  EXPECT_EQ(out.str(), "cuda:2 cpu cuda cpu");
}

TEST(Device, EqualityAndHash) {
  EXPECT_EQ(Device("cuda:1"), Device(kCUDA, 1));
  EXPECT_NE(Device("cuda"), Device("cuda:0"));  // "none given" is not device 0
  EXPECT_NE(Device("cpu"), Device("cpu:0"));
  EXPECT_NE(Device("cuda:0"), Device("cuda:1"));
  EXPECT_NE(Device(kCPU), Device(kCUDA));

  std::hash<Device> hash;
  EXPECT_EQ(hash(Device("cuda:3")), hash(Device(kCUDA, 3)));
  std::unordered_set<Device> set{Device("cpu"), Device("cuda"), Device("cuda:0"), Device("cuda:1"), Device(kCUDA, 1)};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_TRUE(set.count(Device("cuda:0")));
  EXPECT_FALSE(set.count(Device("cuda:2")));
}

TEST(Device, FailedParseLeavesTargetUnchanged) {
  Device device("cuda:1");
  EXPECT_THROW(device = Device("cuda:01"), ValueError);
  EXPECT_EQ(device, Device(kCUDA, 1));
}

}  // namespace
}  // namespace ember
