// TF32 flags: torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 and
// torch.set_float32_matmul_precision.
//
// Note [One source of truth for matmul TF32]
// PyTorch keeps a single float32 matmul precision; matmul.allow_tf32 is a view of it:
// writing true selects "high", false selects "highest", and reading it answers
// "precision != highest" (so "medium" reads as true). We store only the precision, so the
// flag and the precision can never disagree, whichever was written last. Both values are
// atomics because kernels read them on stream worker threads while users write them.
#include "runtime/backend_flags.h"

#include <atomic>

#include "ember/backends.h"
#include "ember/errors.h"

namespace ember {
namespace {

enum class MatmulPrecision : int { Highest, High, Medium };

// Defaults follow the spec: TF32 allowed for both matmul ("high") and cuDNN.
std::atomic<MatmulPrecision> g_matmul_precision{MatmulPrecision::High};
std::atomic<bool> g_cudnn_allow_tf32{true};

}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  MatmulPrecision value;
  if (precision == "highest") {
    value = MatmulPrecision::Highest;
  } else if (precision == "high") {
    value = MatmulPrecision::High;
  } else if (precision == "medium") {
    value = MatmulPrecision::Medium;
  } else {
    detail::fail<ValueError>("set_float32_matmul_precision: '", precision,
                             "' is not one of 'highest', 'high', or 'medium'");
  }
  g_matmul_precision.store(value, std::memory_order_relaxed);
}

std::string get_float32_matmul_precision() {
  switch (g_matmul_precision.load(std::memory_order_relaxed)) {
    case MatmulPrecision::Highest: return "highest";
    case MatmulPrecision::High: return "high";
    case MatmulPrecision::Medium: return "medium";
  }
  return "highest";
}

namespace backends::detail {

MatmulTf32Flag& MatmulTf32Flag::operator=(bool allow) {
  g_matmul_precision.store(allow ? MatmulPrecision::High : MatmulPrecision::Highest, std::memory_order_relaxed);
  return *this;
}

MatmulTf32Flag::operator bool() const { return ember::detail::matmul_allows_tf32(); }

CudnnTf32Flag& CudnnTf32Flag::operator=(bool allow) {
  g_cudnn_allow_tf32.store(allow, std::memory_order_relaxed);
  return *this;
}

CudnnTf32Flag::operator bool() const { return ember::detail::cudnn_allows_tf32(); }

}  // namespace backends::detail

namespace detail {

bool matmul_allows_tf32() noexcept {
  return g_matmul_precision.load(std::memory_order_relaxed) != MatmulPrecision::Highest;
}

bool cudnn_allows_tf32() noexcept { return g_cudnn_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace detail
}  // namespace ember
