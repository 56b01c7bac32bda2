// gather, scatter_add and scatter_add_: argument checks with PyTorch's messages, then one
// Gather or ScatterAdd launch (kernel_call.h). scatter_add_ under recording runs the
// out-of-place op and copies the result in, so self's history goes through copy_.

#include "ember/errors.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "ops/overlap.h"

namespace ember {

namespace {

using detail::KernelCall;
using detail::OpKind;

// A 0-dim tensor as the 1-element vector PyTorch's scatter/gather treat it as.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

void check_index(const Tensor& self, const Tensor& index, const char* op) {
  detail::check_same_device(self, index);
  EMBER_CHECK(index.dtype() == kInt64, TypeError, op, "(): Expected dtype int64 for index");
}

Tensor gather_impl(const Tensor& a, int64_t dim, const Tensor& index) {
  check_index(a, index, "gather");
  Tensor x = at_least_1d(a), ix = at_least_1d(index);
  const int64_t d = detail::wrap_dim(dim, x.dim());
  EMBER_CHECK(ix.dim() == x.dim(), ValueError, "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t i = 0; i < x.dim(); ++i) {
    EMBER_CHECK(i == d || ix.size(i) <= x.size(i), ValueError, "Size does not match at dimension ", i,
                " expected index ", detail::IntListPrinter{ix.sizes()}, " to be smaller than self ",
                detail::IntListPrinter{x.sizes()}, " apart from dimension ", d);
  }
  Tensor out = detail::empty_on(ix.sizes(), x.dtype(), x.device());
  KernelCall call{OpKind::Gather, {detail::make_arg(out)}, {detail::make_arg(x), detail::make_arg(ix)}};
  call.args = detail::kargs::Dim{d};
  detail::launch(x.device(), call);
  return index.dim() == 0 ? out.reshape({}) : out;
}

// Checks scatter_add's arguments; returns the wrapped dim.
int64_t check_scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index(self, index, "scatter_add_");
  detail::check_same_device(self, src);
  EMBER_CHECK(src.dtype() == self.dtype(), TypeError, "scatter(): Expected self.dtype to be equal to src.dtype");
  Tensor x = at_least_1d(self), ix = at_least_1d(index), s = at_least_1d(src);
  const int64_t d = detail::wrap_dim(dim, x.dim());
  EMBER_CHECK(ix.dim() == x.dim(), ValueError, "Index tensor must have the same number of dimensions as self tensor");
  EMBER_CHECK(ix.dim() == s.dim(), ValueError, "Index tensor must have the same number of dimensions as src tensor");
  for (int64_t i = 0; i < x.dim(); ++i) {
    EMBER_CHECK(ix.size(i) <= s.size(i) && (i == d || ix.size(i) <= x.size(i)), ValueError, "Expected index ",
                detail::IntListPrinter{ix.sizes()}, " to be smaller than self ", detail::IntListPrinter{x.sizes()},
                " apart from dimension ", d, " and to be smaller size than src ", detail::IntListPrinter{s.sizes()});
  }
  return d;
}

// out += src at index along d, in place on `out` (already checked).
void scatter_add_into(Tensor& out, int64_t d, const Tensor& index, const Tensor& src) {
  Tensor o = at_least_1d(out), ix = at_least_1d(index), s = at_least_1d(src);
  KernelCall call{OpKind::ScatterAdd, {detail::make_arg(o)}, {detail::make_arg(ix), detail::make_arg(s)}};
  call.args = detail::kargs::Dim{d};
  detail::launch(out.device(), call);
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
  return detail::op_entry(
      {.formula = detail::Formula::Gather, .attrs = detail::DimArgs{d}},
      [d](const Tensor& a, const Tensor& index) { return gather_impl(a, d, index); }, a, index);
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  // The index takes part in the policy's choice but is used as given: a valid (int64) index
  // is never cast.
  return detail::op_entry(
      {detail::AutocastOp::kScatterAdd},
      [&](const Tensor& a, const Tensor& /*index*/, const Tensor& src) {
        const int64_t d = check_scatter(a, dim, index, src);
        return detail::op_entry(
            {.formula = detail::Formula::ScatterAdd, .attrs = detail::DimArgs{d}},
            [d](const Tensor& a, const Tensor& index, const Tensor& src) {
              Tensor out = a.clone();
              scatter_add_into(out, d, index, src);
              return out;
            },
            a, index, src);
      },
      a, index, src);
}

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t d = check_scatter(*this, dim, index, src);
  detail::check_no_internal_overlap(*this);
  // As PyTorch's scatter ops (assert_no_overlap): self may be neither the index nor the
  // source, whose elements it would overwrite while they are still being read.
  detail::check_no_overlap(*this, index);
  detail::check_no_overlap(*this, src);
  if (detail::should_record(*this, src)) {
    // The node saves its inputs: a copy of self's old value, not self, which the copy_ below
    // makes that node's output (saving self would be a reference cycle through its history).
    Tensor before = clone();
    return copy_(ember::scatter_add(before, d, index, src));
  }
  detail::recorder().check_inplace(*this, src);
  scatter_add_into(*this, d, index, src);
  detail::bump_version(*this);
  return *this;
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ember::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return ember::scatter_add(*this, dim, index, src);
}

}  // namespace ember
