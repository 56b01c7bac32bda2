// Precision flags: torch.backends' fp32_precision settings (PyTorch 2.9), the spec's TF32 flags
// (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
// torch.set_float32_matmul_precision) and cuBLAS's reduced-precision switches.
//
// Note [One source of truth for float32 precision]
// PyTorch 2.9 keeps a tree of float32 precisions: a global one, cuDNN's ("cuda", "all"), and
// under it matmul, conv and rnn. A family set to "none" inherits its parent's value, and a
// cuda family that would inherit "bf16" (which only the global setting accepts, for oneDNN)
// reads "none". The older flags are views of that tree, and we store only the tree, so a
// flag and a precision can never disagree, whichever was written last:
//   - matmul.allow_tf32 = b writes matmul "tf32" or "ieee"; it reads "matmul resolves to tf32";
//   - set_float32_matmul_precision writes matmul ("highest": "ieee", "high"/"medium": "tf32");
//     get_float32_matmul_precision answers "highest" unless matmul resolves to tf32, then
//     "medium" if that was the last matmul write, else "high";
//   - cudnn.allow_tf32 = b writes conv and rnn "tf32" or "none" (as PyTorch: off inherits);
//     it reads their common value, and throws PyTorch's error when they differ.
// PyTorch also keeps the legacy values apart and throws when they disagree with the tree
// ("a mix of the legacy and new APIs"); ember's views cannot disagree, so only cudnn.allow_tf32
// (one flag over two families) can throw. Defaults follow the spec, which allows TF32 for both
// matmul and cuDNN: matmul "tf32" (PyTorch's default is "ieee", i.e. precision "highest"),
// conv and rnn "tf32", cuDNN "none", global "ieee".
// Every value is an atomic because kernels read them on stream worker threads while users
// write them; ops read them when they launch, as PyTorch's read them per call.
#include "runtime/backend_flags.h"

#include <array>
#include <atomic>

#include "ember/backends.h"
#include "ember/errors.h"

namespace ember {
namespace {

using backends::detail::BlasSwitch;
using backends::detail::Fp32Setting;

enum class Precision : uint8_t { kNone, kIeee, kTf32, kBf16 };

constexpr std::array<std::string_view, 4> kPrecisionNames{"none", "ieee", "tf32", "bf16"};

// Indexed by Fp32Setting.
std::array<std::atomic<Precision>, 5> g_fp32{Precision::kIeee, Precision::kNone, Precision::kTf32, Precision::kTf32,
                                             Precision::kTf32};
// set_float32_matmul_precision("medium") was the last write of matmul's setting.
std::atomic<bool> g_matmul_medium{false};
// Indexed by BlasSwitch: fp16 and bf16 reduced-precision reductions allowed, fp16 accumulation not.
std::array<std::atomic<bool>, 3> g_blas{true, true, false};

std::atomic<Precision>& slot(Fp32Setting setting) { return g_fp32[static_cast<size_t>(setting)]; }

Precision stored(Fp32Setting setting) { return slot(setting).load(std::memory_order_relaxed); }

// The value in force: a "none" resolves through cuDNN's setting, then the global one.
Precision resolved(Fp32Setting setting) {
  Precision p = stored(setting);
  if (setting == Fp32Setting::kGlobal) return p;
  if (p == Precision::kNone && setting != Fp32Setting::kCudnn) p = stored(Fp32Setting::kCudnn);
  if (p == Precision::kNone) p = stored(Fp32Setting::kGlobal);
  return p == Precision::kBf16 ? Precision::kNone : p;  // "cuda" does not support "bf16"
}

void set_matmul(Precision p, bool medium) {
  slot(Fp32Setting::kMatmul).store(p, std::memory_order_relaxed);
  g_matmul_medium.store(medium, std::memory_order_relaxed);
}

}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  if (precision == "highest") {
    set_matmul(Precision::kIeee, false);
  } else if (precision == "high") {
    set_matmul(Precision::kTf32, false);
  } else if (precision == "medium") {
    set_matmul(Precision::kTf32, true);
  } else {
    detail::fail<ValueError>("set_float32_matmul_precision: '", precision,
                             "' is not one of 'highest', 'high', or 'medium'");
  }
}

std::string get_float32_matmul_precision() {
  if (!detail::matmul_allows_tf32()) return "highest";
  return g_matmul_medium.load(std::memory_order_relaxed) ? "medium" : "high";
}

namespace backends::detail {

Fp32Precision& Fp32Precision::operator=(std::string_view precision) {
  size_t index = 0;
  while (index < kPrecisionNames.size() && kPrecisionNames[index] != precision) ++index;
  EMBER_CHECK(index < kPrecisionNames.size(), Error, "Unknown precision: ", precision);
  const auto p = static_cast<Precision>(index);
  EMBER_CHECK(!(setting_ != Fp32Setting::kGlobal && p == Precision::kBf16), Error,
              "backend 'cuda' does not support precision 'bf16'");
  if (setting_ == Fp32Setting::kMatmul) {
    set_matmul(p, false);
  } else {
    slot(setting_).store(p, std::memory_order_relaxed);
  }
  return *this;
}

Fp32Precision::operator std::string() const {
  return std::string(kPrecisionNames[static_cast<size_t>(resolved(setting_))]);
}

MatmulTf32Flag& MatmulTf32Flag::operator=(bool allow) {
  set_matmul(allow ? Precision::kTf32 : Precision::kIeee, false);
  return *this;
}

MatmulTf32Flag::operator bool() const { return ember::detail::matmul_allows_tf32(); }

CudnnTf32Flag& CudnnTf32Flag::operator=(bool allow) {
  const Precision p = allow ? Precision::kTf32 : Precision::kNone;
  slot(Fp32Setting::kConv).store(p, std::memory_order_relaxed);
  slot(Fp32Setting::kRnn).store(p, std::memory_order_relaxed);
  return *this;
}

CudnnTf32Flag::operator bool() const {
  const bool conv = ember::detail::cudnn_conv_allows_tf32(), rnn = ember::detail::cudnn_rnn_allows_tf32();
  EMBER_CHECK(conv == rnn, Error,
              "PyTorch is checking whether allow_tf32 is enabled for cuDNN without a specific operator name,but the "
              "current flag(s) indicate that cuDNN conv and cuDNN RNN have different TF32 flags.This combination "
              "indicates that you have used a mix of the legacy and new APIs to set the TF32 flags. We suggest only "
              "using the new API to set the TF32 flag(s). See also: "
              "https://pytorch.org/docs/main/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices");
  return conv;
}

BlasFlag& BlasFlag::operator=(bool allow) {
  g_blas[static_cast<size_t>(which_)].store(allow, std::memory_order_relaxed);
  return *this;
}

BlasFlag::operator bool() const { return g_blas[static_cast<size_t>(which_)].load(std::memory_order_relaxed); }

}  // namespace backends::detail

namespace detail {

bool matmul_allows_tf32() noexcept { return resolved(Fp32Setting::kMatmul) == Precision::kTf32; }

bool cudnn_conv_allows_tf32() noexcept { return resolved(Fp32Setting::kConv) == Precision::kTf32; }

bool cudnn_rnn_allows_tf32() noexcept { return resolved(Fp32Setting::kRnn) == Precision::kTf32; }

bool blas_allows(backends::detail::BlasSwitch which) noexcept {
  return g_blas[static_cast<size_t>(which)].load(std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace ember
