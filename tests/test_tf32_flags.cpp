// TF32 flags: defaults, the matmul flag <-> precision link, cudnn independence, errors.
#include <gtest/gtest.h>

#include "runtime/backend_flags.h"
#include "ember/backends.h"
#include "ember/errors.h"

namespace {

namespace backends = ember::backends;

// Every test leaves the process defaults behind it.
class Tf32Flags : public ::testing::Test {
 protected:
  void TearDown() override {
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
  }
};

TEST_F(Tf32Flags, DefaultsAllowTf32AsTheSpecSays) {
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  EXPECT_TRUE(static_cast<bool>(backends::cudnn.allow_tf32));
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
  EXPECT_TRUE(ember::detail::cudnn_allows_tf32());
}

TEST_F(Tf32Flags, MatmulFlagAndPrecisionStayConsistent) {
  backends::cuda::matmul.allow_tf32 = false;
  EXPECT_EQ(ember::get_float32_matmul_precision(), "highest");
  EXPECT_FALSE(ember::detail::matmul_allows_tf32());
  backends::cuda::matmul.allow_tf32 = true;
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");

  ember::set_float32_matmul_precision("highest");
  EXPECT_FALSE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  ember::set_float32_matmul_precision("medium");
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  EXPECT_EQ(ember::get_float32_matmul_precision(), "medium");
  ember::set_float32_matmul_precision("high");
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
}

TEST_F(Tf32Flags, CudnnFlagIsIndependentOfMatmul) {
  backends::cudnn.allow_tf32 = false;
  EXPECT_FALSE(ember::detail::cudnn_allows_tf32());
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
  ember::set_float32_matmul_precision("highest");
  backends::cudnn.allow_tf32 = true;
  EXPECT_TRUE(ember::detail::cudnn_allows_tf32());
  EXPECT_FALSE(ember::detail::matmul_allows_tf32());
}

TEST_F(Tf32Flags, BadPrecisionIsAValueErrorAndLeavesStateIntact) {
  ember::set_float32_matmul_precision("medium");
  for (const char* bad : {"", "low", "High", "highest "}) {
    try {
      ember::set_float32_matmul_precision(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const ember::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "' is not one of 'highest', 'high', or 'medium'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(ember::get_float32_matmul_precision(), "medium");
}

}  // namespace
