// Precision flags: defaults, the allow_tf32 flags and set_float32_matmul_precision as views of
// PyTorch 2.9's fp32_precision settings (both ways), inheritance through "none", the cuBLAS
// switches, errors. Their effect on results is in test_tf32_table.cpp.
#include <gtest/gtest.h>

#include "ember/backends.h"
#include "ember/errors.h"
#include "runtime/backend_flags.h"

namespace {

namespace backends = ember::backends;

// Every test leaves the process defaults behind it.
class Tf32Flags : public ::testing::Test {
 protected:
  void TearDown() override {
    backends::fp32_precision = "ieee";
    backends::cudnn.fp32_precision = "none";
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
    backends::cuda::matmul.allow_fp16_reduced_precision_reduction = true;
    backends::cuda::matmul.allow_bf16_reduced_precision_reduction = true;
    backends::cuda::matmul.allow_fp16_accumulation = false;
  }
  // The value a setting reads.
  static std::string read(const backends::detail::Fp32Precision& setting) { return setting; }
};

TEST_F(Tf32Flags, DefaultsAllowTf32AsTheSpecSays) {
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  EXPECT_TRUE(static_cast<bool>(backends::cudnn.allow_tf32));
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
  EXPECT_TRUE(ember::detail::cudnn_conv_allows_tf32());
  EXPECT_TRUE(ember::detail::cudnn_rnn_allows_tf32());
}

TEST_F(Tf32Flags, Fp32PrecisionDefaultsAgreeWithTheSpecsTf32Defaults) {
  // PyTorch 2.9's defaults except matmul, which the spec allows TF32 ("high"; PyTorch: "ieee").
  EXPECT_EQ(read(backends::fp32_precision), "ieee");
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "tf32");
  EXPECT_EQ(read(backends::cudnn.fp32_precision), "ieee");  // "none", read through the global one
  EXPECT_EQ(read(backends::cudnn.conv.fp32_precision), "tf32");
  EXPECT_EQ(read(backends::cudnn.rnn.fp32_precision), "tf32");
  EXPECT_TRUE(backends::cuda::matmul.fp32_precision == "tf32");
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_fp16_reduced_precision_reduction));
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_bf16_reduced_precision_reduction));
  EXPECT_FALSE(static_cast<bool>(backends::cuda::matmul.allow_fp16_accumulation));
}

TEST_F(Tf32Flags, MatmulFp32PrecisionAndTheLegacyFlagsAreOneState) {
  backends::cuda::matmul.fp32_precision = "ieee";
  EXPECT_FALSE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  EXPECT_EQ(ember::get_float32_matmul_precision(), "highest");
  backends::cuda::matmul.allow_tf32 = true;
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "tf32");
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  ember::set_float32_matmul_precision("highest");
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "ieee");
  ember::set_float32_matmul_precision("medium");
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "tf32");
  EXPECT_EQ(ember::get_float32_matmul_precision(), "medium");
  backends::cuda::matmul.fp32_precision = "tf32";  // a write of the setting itself: "high"
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
}

TEST_F(Tf32Flags, CudnnFp32PrecisionsAndTheLegacyFlagAreOneState) {
  backends::cudnn.allow_tf32 = false;  // conv and rnn "none": they inherit "ieee"
  EXPECT_EQ(read(backends::cudnn.conv.fp32_precision), "ieee");
  EXPECT_EQ(read(backends::cudnn.rnn.fp32_precision), "ieee");
  EXPECT_FALSE(ember::detail::cudnn_conv_allows_tf32());
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());  // the matmul setting is apart
  backends::cudnn.conv.fp32_precision = "tf32";
  backends::cudnn.rnn.fp32_precision = "tf32";
  EXPECT_TRUE(static_cast<bool>(backends::cudnn.allow_tf32));
  // conv and rnn apart: the one flag over both has no answer, as in PyTorch.
  backends::cudnn.rnn.fp32_precision = "ieee";
  EXPECT_TRUE(ember::detail::cudnn_conv_allows_tf32());
  EXPECT_FALSE(ember::detail::cudnn_rnn_allows_tf32());
  try {
    (void)static_cast<bool>(backends::cudnn.allow_tf32);
    FAIL() << "read a cudnn flag over conv and rnn that differ";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("PyTorch is checking whether allow_tf32 is enabled for cuDNN without a "
                                         "specific operator name,but the current flag(s) indicate that cuDNN conv "
                                         "and cuDNN RNN have different TF32 flags."),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Tf32Flags, NoneInheritsAndTheNearestSettingWins) {
  backends::cuda::matmul.fp32_precision = "none";
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "ieee");  // through cudnn ("none") to the global one
  EXPECT_FALSE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  backends::fp32_precision = "tf32";
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "tf32");
  EXPECT_EQ(read(backends::cudnn.fp32_precision), "tf32");
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  backends::cudnn.fp32_precision = "ieee";  // cuDNN's ("cuda", "all") is nearer than the global one
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "ieee");
  EXPECT_EQ(read(backends::fp32_precision), "tf32");
  backends::cudnn.conv.fp32_precision = "none";
  EXPECT_FALSE(ember::detail::cudnn_conv_allows_tf32());
  EXPECT_TRUE(ember::detail::cudnn_rnn_allows_tf32());  // its own "tf32" wins
  backends::cuda::matmul.fp32_precision = "tf32";
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
  // "bf16" is for oneDNN: the global setting takes it, a cuda setting inheriting it reads "none".
  backends::cudnn.fp32_precision = "none";
  backends::cuda::matmul.fp32_precision = "none";
  backends::fp32_precision = "bf16";
  EXPECT_EQ(read(backends::fp32_precision), "bf16");
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "none");
  EXPECT_FALSE(ember::detail::matmul_allows_tf32());
}

TEST_F(Tf32Flags, BadFp32PrecisionIsAnErrorAndLeavesStateIntact) {
  backends::cudnn.conv.fp32_precision = "ieee";
  auto expect_refused = [](backends::detail::Fp32Precision& setting, const std::string& value,
                           const std::string& message) {
    try {
      setting = value;
      FAIL() << "accepted '" << value << "'";
    } catch (const ember::Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  for (const char* bad : {"", "TF32", "highest", "default", "fp16"}) {
    expect_refused(backends::cuda::matmul.fp32_precision, bad, std::string("Unknown precision: ") + bad);
    expect_refused(backends::fp32_precision, bad, std::string("Unknown precision: ") + bad);
  }
  for (auto* setting : {&backends::cuda::matmul.fp32_precision, &backends::cudnn.fp32_precision,
                        &backends::cudnn.conv.fp32_precision, &backends::cudnn.rnn.fp32_precision}) {
    expect_refused(*setting, "bf16", "backend 'cuda' does not support precision 'bf16'");
  }
  EXPECT_EQ(read(backends::fp32_precision), "ieee");
  EXPECT_EQ(read(backends::cuda::matmul.fp32_precision), "tf32");
  EXPECT_EQ(ember::get_float32_matmul_precision(), "high");
  EXPECT_EQ(read(backends::cudnn.fp32_precision), "ieee");
  EXPECT_EQ(read(backends::cudnn.conv.fp32_precision), "ieee");
  EXPECT_EQ(read(backends::cudnn.rnn.fp32_precision), "tf32");
}

TEST_F(Tf32Flags, CublasSwitchesReadBackWhatWasWritten) {
  backends::cuda::matmul.allow_fp16_reduced_precision_reduction = false;
  backends::cuda::matmul.allow_fp16_accumulation = true;
  EXPECT_FALSE(static_cast<bool>(backends::cuda::matmul.allow_fp16_reduced_precision_reduction));
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_bf16_reduced_precision_reduction));
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_fp16_accumulation));
  backends::cuda::matmul.allow_bf16_reduced_precision_reduction = false;
  EXPECT_FALSE(ember::detail::blas_allows(backends::detail::BlasSwitch::kBf16ReducedPrecisionReduction));
  EXPECT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));  // the TF32 state is apart
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
  EXPECT_FALSE(ember::detail::cudnn_conv_allows_tf32());
  EXPECT_FALSE(ember::detail::cudnn_rnn_allows_tf32());
  EXPECT_TRUE(ember::detail::matmul_allows_tf32());
  ember::set_float32_matmul_precision("highest");
  backends::cudnn.allow_tf32 = true;
  EXPECT_TRUE(ember::detail::cudnn_conv_allows_tf32());
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
