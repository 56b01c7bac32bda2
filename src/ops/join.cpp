// cat, stack, chunk and split: joining tensors along a dim and views that take them apart.
//
// cat allocates the result once and copies each input into its slice (one Copy
// KernelCall per input, which also converts to the promoted dtype); chunk and split
// return views, as PyTorch's do.
#include "core/type_promotion.h"
#include "ember/errors.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

using detail::IntListPrinter;

namespace {

// PyTorch still skips 1-D tensors of size 0 in cat whatever the other shapes.
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

}  // namespace

namespace {
Tensor cat_impl(const std::vector<Tensor>& tensors, int64_t dim);
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  // Its attrs are built only when it records: a precision door, then a recording one.
  return ember::detail::op_entry(
      {detail::AutocastOp::kCat},
      [dim](const std::vector<Tensor>& tensors) {
        if (!ember::detail::should_record(tensors)) return cat_impl(tensors, dim);
        ember::detail::CatArgs attrs;  // each input's size along dim (-1: a skipped empty input)
        const Tensor* reference = &tensors[0];
        for (const Tensor& t : tensors) {
          if (!is_legacy_empty(t)) reference = &t;
        }
        attrs.dim = detail::wrap_dim(dim, reference->dim());
        for (const Tensor& t : tensors) attrs.sizes.push_back(is_legacy_empty(t) ? -1 : t.size(attrs.dim));
        return ember::detail::op_entry(
            {.formula = ember::detail::Formula::Cat, .attrs = std::move(attrs)},
            [dim](const std::vector<Tensor>& tensors) { return cat_impl(tensors, dim); }, tensors);
      },
      tensors);
}

namespace {
Tensor cat_impl(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), ValueError, "torch.cat(): expected a non-empty list of Tensors");
  detail::ResultTypeState promotion;
  const Tensor* reference = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined(), ValueError, "torch.cat(): tensor number ", i, " in the list is undefined");
    EMBER_CHECK(t.dim() > 0, ValueError, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    detail::check_same_device(tensors[0], t);
    promotion.update(detail::Operand::tensor(t.dtype(), t.dim()));
    if (!reference && !is_legacy_empty(t)) reference = &t;
  }
  const DType dtype = promotion.result();
  if (!reference) reference = &tensors[0];
  const int64_t d = detail::wrap_dim(dim, reference->dim());
  IntList shape = reference->sizes();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_legacy_empty(t)) continue;
    EMBER_CHECK(t.dim() == reference->dim(), ValueError, "Tensors must have same number of dimensions: got ",
                reference->dim(), " and ", t.dim());
    for (int64_t k = 0; k < t.dim(); ++k) {
      EMBER_CHECK(k == d || t.size(k) == reference->size(k), ValueError,
                  "Sizes of tensors must match except in dimension ", d, ". Expected size ", reference->size(k),
                  " but got size ", t.size(k), " for tensor number ", i, " in the list.");
    }
    shape[d] += t.size(d);
  }
  Tensor out = detail::empty_on(shape, dtype, tensors[0].device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t)) continue;
    const int64_t size = t.size(d);
    if (size > 0 && out.numel() > 0) out.narrow(d, offset, size).copy_(t);
    offset += size;
  }
  return out;
}
}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  // Its attrs follow checks on the cast inputs: a precision door, then a recording one.
  return ember::detail::op_entry(
      {detail::AutocastOp::kStack},
      [dim](const std::vector<Tensor>& tensors) {
        EMBER_CHECK(!tensors.empty(), ValueError, "stack expects a non-empty TensorList");
        const int64_t d = detail::wrap_dim(dim, tensors[0].dim() + 1);
        for (size_t i = 0; i < tensors.size(); ++i) {
          EMBER_CHECK(tensors[i].sizes() == tensors[0].sizes(), ValueError,
                      "stack expects each tensor to be equal size, but got ", IntListPrinter{tensors[0].sizes()},
                      " at entry 0 and ", IntListPrinter{tensors[i].sizes()}, " at entry ", i);
        }
        auto compute = [d](const std::vector<Tensor>& tensors) {
          std::vector<Tensor> expanded;
          expanded.reserve(tensors.size());
          for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
          return cat(expanded, d);
        };
        return ember::detail::op_entry({.formula = ember::detail::Formula::Stack, .attrs = ember::detail::DimArgs{d}},
                                       compute, tensors);
      },
      tensors);
}

namespace {
std::vector<Tensor> split_views(const Tensor& a, const IntList& split_sizes, int64_t d) {
  std::vector<Tensor> parts;
  parts.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    parts.push_back(a.narrow(d, start, s));
    start += s;
  }
  return parts;
}

// The parts as views of `a`, recorded as one node named `name` (SplitBackward0 or
// SplitWithSizesBackward0, as PyTorch's split/chunk) rather than one slice node each.
std::vector<Tensor> recorded_split(const Tensor& a, const IntList& split_sizes, int64_t d, const char* name) {
  std::vector<Tensor> parts;
  {
    NoGradGuard no_grad;
    parts = split_views(a, split_sizes, d);
  }
  for (const Tensor& p : parts) ember::detail::note_view(a, p, /*multi_output=*/true);
  if (!ember::detail::should_record(a)) return parts;
  std::vector<Tensor*> outputs;
  for (Tensor& p : parts) outputs.push_back(&p);
  ember::detail::record(ember::detail::Formula::Split, {a}, outputs,
                        ember::detail::Attrs(ember::detail::DimArgs{d}, name));
  return parts;
}

void check_split_sizes(const Tensor& a, const IntList& split_sizes, int64_t d) {
  const int64_t size = a.size(d);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    EMBER_CHECK(s >= 0, ValueError,
                "split_with_sizes expects split_sizes have only non-negative entries, but got "
                "split_sizes=",
                IntListPrinter{split_sizes});
    total += s;
  }
  EMBER_CHECK(total == size, ValueError, "split_with_sizes expects split_sizes to sum exactly to ", size,
              " (input tensor's size at dimension ", d, "), but got split_sizes=", IntListPrinter{split_sizes});
}
}  // namespace

std::vector<Tensor> split(const Tensor& a, const IntList& split_sizes, int64_t dim) {
  EMBER_CHECK(a.dim() > 0, ValueError, "split expects at least a 1-dimensional tensor");
  const int64_t d = detail::wrap_dim(dim, a.dim());
  check_split_sizes(a, split_sizes, d);
  return recorded_split(a, split_sizes, d, "SplitWithSizesBackward0");
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  EMBER_CHECK(a.dim() > 0, ValueError, "split expects at least a 1-dimensional tensor");
  EMBER_CHECK(split_size >= 0, ValueError, "split expects split_size be non-negative, but got split_size=", split_size);
  const int64_t d = detail::wrap_dim(dim, a.dim());
  const int64_t size = a.size(d);
  EMBER_CHECK(split_size > 0 || size == 0, ValueError,
              "split_size can only be 0 if dimension size is 0, but got dimension size of ", size);
  const int64_t count = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  IntList sizes(static_cast<size_t>(count), split_size);
  sizes.back() = split_size - (split_size * count - size);
  return recorded_split(a, sizes, d, "SplitBackward0");
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  EMBER_CHECK(a.dim() > 0, ValueError, "chunk expects at least a 1-dimensional tensor");
  EMBER_CHECK(chunks > 0, ValueError, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t d = detail::wrap_dim(dim, a.dim());
  const int64_t size = a.size(d);
  const int64_t split_size = (size + chunks - 1) / chunks;
  if (split_size == 0 && size == 0) return split(a, IntList(static_cast<size_t>(chunks), 0), d);
  return split(a, split_size, d);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return ember::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return ember::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(const IntList& split_sizes, int64_t dim) const {
  return ember::split(*this, split_sizes, dim);
}

}  // namespace ember
