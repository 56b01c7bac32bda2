// Parsers of the runtime's environment variables.
#include <gtest/gtest.h>

#include "ember/errors.h"
#include "runtime/env.h"

using ember::detail::parse_device_count;
using ember::detail::parse_memory_size;

namespace {

TEST(RuntimeEnv, MemorySizes) {
  EXPECT_EQ(parse_memory_size("8GiB", "M"), size_t{8} << 30);
  EXPECT_EQ(parse_memory_size("512MiB", "M"), size_t{512} << 20);
  EXPECT_EQ(parse_memory_size("1.5GiB", "M"), size_t{3} << 29);
  EXPECT_EQ(parse_memory_size("1073741824", "M"), size_t{1} << 30);
  EXPECT_EQ(parse_memory_size("64KB", "M"), size_t{64000});
  EXPECT_EQ(parse_memory_size("64kib", "M"), size_t{65536});
  EXPECT_EQ(parse_memory_size(" 2 GB ", "M"), size_t{2000000000});
  EXPECT_EQ(parse_memory_size("100B", "M"), size_t{100});
  EXPECT_EQ(parse_memory_size("1TiB", "M"), size_t{1} << 40);
}

TEST(RuntimeEnv, BadMemorySizesNameTheValue) {
  for (const char* bad : {"", "0", "0GiB", "lots", "8XB", "-1GiB", "1.2.3GiB", "GiB", "0.1B"}) {
    try {
      parse_memory_size(bad, "EMBER_EMULATED_MEMORY");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ember::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("EMBER_EMULATED_MEMORY"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(RuntimeEnv, DeviceCounts) {
  EXPECT_EQ(parse_device_count("4", "N"), 4);
  EXPECT_EQ(parse_device_count(" 64 ", "N"), 64);
  for (const char* bad : {"0", "65", "-1", "four", "2x", "", "1000"}) {
    EXPECT_THROW(parse_device_count(bad, "EMBER_EMULATED_DEVICES"), ember::ValueError) << bad;
  }
  try {
    parse_device_count("four", "EMBER_EMULATED_DEVICES");
  } catch (const ember::ValueError& e) {
    EXPECT_STREQ(e.what(), "EMBER_EMULATED_DEVICES must be a number of devices between 1 and 64, but got 'four'");
  }
}

}  // namespace
