// sort and topk: one Sort launch (kernel_call.h) writes the first k values of each line in
// stable order and their int64 positions; both record one node whose backward puts the
// output's gradient back at those positions (SortBackward0, TopkBackward0).
#include "ember/errors.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"
#include "ops/recording.h"

namespace ember {

namespace {

using detail::KernelCall;
using detail::OpKind;

// The first k of each line along dim (wrapped; a 0-dim tensor is one line of one element).
std::pair<Tensor, Tensor> sorted_prefix(const Tensor& a, int64_t dim, int64_t k, bool descending) {
  EMBER_CHECK(!is_complex(a.dtype()), TypeError, "\"sort\" not implemented for '", detail::scalar_type_name(a.dtype()),
              "'");
  Tensor x = a.dim() == 0 ? a.unsqueeze(0) : a;
  IntList sizes = x.sizes();
  sizes[static_cast<size_t>(dim)] = k;
  Tensor values = detail::empty_on(sizes, x.dtype(), x.device());
  Tensor indices = detail::empty_on(sizes, kInt64, x.device());
  KernelCall call{OpKind::Sort, {detail::make_arg(values), detail::make_arg(indices)}, {detail::make_arg(x)}};
  call.args = detail::kargs::Sort{dim, descending};
  detail::launch(x.device(), call);
  if (a.dim() == 0) return {values.squeeze(0), indices.squeeze(0)};
  return {values, indices};
}

std::pair<Tensor, Tensor> recorded_sort(const Tensor& a, int64_t dim, int64_t k, bool descending, const char* node) {
  if (!detail::should_record(a)) return sorted_prefix(a, dim, k, descending);
  std::pair<Tensor, Tensor> out;
  {
    NoGradGuard no_grad;
    out = sorted_prefix(a, dim, k, descending);
  }
  detail::record(detail::Formula::Sort, {a}, std::vector<Tensor*>{&out.first, &out.second},
                 detail::Attrs(detail::DimArgs{dim}, node));
  return out;
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
  return recorded_sort(a, d, a.dim() == 0 ? 1 : a.size(d), descending, "SortBackward0");
}

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
  const int64_t n = a.dim() == 0 ? 1 : a.size(d);
  EMBER_CHECK(k >= 0 && k <= n, ValueError, "selected index k out of range");
  return recorded_sort(a, d, k, largest, "TopkBackward0");
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return ember::sort(*this, dim, descending);
}
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return ember::topk(*this, k, dim, largest, sorted);
}

}  // namespace ember
