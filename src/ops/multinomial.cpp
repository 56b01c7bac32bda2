// multinomial: PyTorch's checks, then one Multinomial launch (kernel_call.h) over a float64
// copy of the weights that the kernel may overwrite (without replacement it marks the
// categories drawn). The draws come from the default generator's Philox stream, so a
// seed gives the same samples on every backend (Note [Line kernels] in
// kernels/line_bodies.h); they are not PyTorch's numbers (another generator).
#include <cmath>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/fork_rng.h"
#include "ops/launch.h"

namespace ember {

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, std::optional<Generator> generator) {
  EMBER_CHECK(
      is_floating_point(probs.dtype()), TypeError,
      "multinomial only supports floating-point dtypes for input, got: ", detail::scalar_type_name(probs.dtype()));
  EMBER_CHECK(probs.dim() == 1 || probs.dim() == 2, ValueError, "prob_dist must be 1 or 2 dim");
  EMBER_CHECK(num_samples > 0, ValueError, "cannot sample n_sample <= 0 samples");
  const int64_t categories = probs.size(-1);
  EMBER_CHECK(replacement || num_samples <= categories, ValueError,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  EMBER_CHECK(categories <= (int64_t{1} << 24), ValueError, "number of categories cannot exceed 2^24");
  const int64_t rows = probs.dim() == 1 ? 1 : probs.size(0);
  Tensor out = detail::empty_on({rows, num_samples}, kInt64, probs.device());
  if (rows > 0) {
    Tensor work;
    {
      NoGradGuard no_grad;
      EMBER_CHECK(categories > 0, ValueError, "invalid multinomial distribution (sum of probabilities <= 0)");
      work = probs.reshape({rows, categories}).to(kFloat64, false, /*copy=*/true).contiguous();
      // One synchronizing read of the checks, as PyTorch's (inf, NaN and negatives first).
      Tensor low = work.min(), high = work.max();
      const double lowest = low.item<double>(), highest = high.item<double>();
      EMBER_CHECK(lowest >= 0 && std::isfinite(highest), ValueError,
                  "probability tensor contains either `inf`, `nan` or element < 0");
      EMBER_CHECK(work.sum(1).min().item<double>() > 0, ValueError,
                  "invalid multinomial distribution (sum of probabilities <= 0)");
    }
    // Four counters a draw, as uniform_ reserves for doubles.
    auto [seed, offset] =
        detail::reserve_random(probs.device(), 4 * static_cast<uint64_t>(rows * num_samples), generator);
    detail::KernelCall call{detail::OpKind::Multinomial, {detail::make_arg(out), detail::make_arg(work)}, {}};
    call.args = detail::kargs::Multinomial{replacement};
    call.seed = seed;
    call.offset = offset;
    detail::launch(probs.device(), call);
  }
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

Tensor Tensor::multinomial(int64_t num_samples, bool replacement, std::optional<Generator> generator) const {
  return ember::multinomial(*this, num_samples, replacement, std::move(generator));
}

}  // namespace ember
