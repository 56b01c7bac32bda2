// Tensor: a cheap, reference-counted handle to a strided view of a Storage.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/generator.h"
#include "ember/scalar.h"
#include "ember/tensor_data.h"
#include "ember/tensor_options.h"

namespace ember {

namespace cuda {
class Stream;
}

namespace autograd {
class Node;
}

namespace detail {
class StorageImpl;
class TensorImpl;
}  // namespace detail

using IntList = std::vector<int64_t>;

class Tensor {
 public:
  /// An undefined tensor; most methods throw on it.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const noexcept { return impl_ != nullptr; }

  // ---- metadata ----------------------------------------------------------
  Device device() const;
  DType dtype() const;
  const IntList& sizes() const;
  const IntList& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  size_t element_size() const;
  size_t nbytes() const;  // numel() * element_size()
  bool is_cuda() const;
  bool is_cpu() const;
  bool is_pinned() const;
  bool is_contiguous() const;
  int get_device() const;  // -1 on cpu
  TensorOptions options() const;
  /// Address of the first element in its device's memory (not host-readable for cuda tensors).
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(data_ptr());
  }
  bool is_same(const Tensor& other) const noexcept { return impl_ == other.impl_; }
  long use_count() const noexcept { return impl_.use_count(); }

  // ---- values ------------------------------------------------------------
  /// The single element as T; synchronizes for cuda tensors. More than one element: ValueError.
  template <typename T>
  T item() const;
  /// All elements in row-major order as T, copied to the host (synchronizing).
  template <typename T>
  std::vector<T> to_vector() const;
  Scalar item() const;
  std::string str() const;  // PyTorch's repr

  // ---- moves and copies ----------------------------------------------------
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(const TensorOptions& options, bool non_blocking = false, bool copy = false) const;
  Tensor to(const char* device, bool non_blocking = false) const { return to(Device(device), non_blocking); }
  Tensor cuda() const;
  Tensor cuda(int index, bool non_blocking = false) const;
  Tensor cuda(Device device, bool non_blocking = false) const;
  Tensor cpu() const;
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor pin_memory() const;
  Tensor clone() const;
  /// Marks the memory as in use by `stream` so the allocator defers its reuse.
  void record_stream(const cuda::Stream& stream) const;

  // ---- views ---------------------------------------------------------------
  Tensor view(const IntList& shape) const;
  Tensor reshape(const IntList& shape) const;
  Tensor t() const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const IntList& dims) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor contiguous() const;
  /// Merges dims start_dim..end_dim into one (a view when the strides allow, else a copy).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// `chunks` views along `dim`, each of ceil(size / chunks) elements except possibly the last.
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  /// Views of `split_size` elements along `dim` (the last may be smaller).
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  /// Views of the given sizes along `dim` (they must sum to size(dim)).
  std::vector<Tensor> split(const IntList& split_sizes, int64_t dim = 0) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const IntList& shape) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  /// A view with explicit sizes, strides (in elements) and storage offset; not bounds-checked.
  Tensor as_strided(const IntList& sizes, const IntList& strides, int64_t offset) const;

  // ---- element-wise and reductions (also free functions in ops.h) ----------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor pow(const Scalar& exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  Tensor min(int64_t dim, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  /// Bounds are optional; at least one must be given.
  Tensor clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt) const;
  /// Tensor bounds (broadcast); an undefined tensor is no bound.
  Tensor clamp(const Tensor& min, const Tensor& max) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  /// Index of the first maximum along `dim` (of the flattened tensor when none), int64.
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// `value` where the (broadcast) bool mask is true, else this tensor's element.
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;  // value: 0-dim
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool equal(const Tensor& other) const;

  // ---- in place ------------------------------------------------------------
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  /// Draw from `generator` when given, else from the device's default generator.
  Tensor& normal_(double mean = 0.0, double std = 1.0, std::optional<Generator> generator = std::nullopt);
  Tensor& uniform_(double from = 0.0, double to = 1.0, std::optional<Generator> generator = std::nullopt);
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator/=(const Tensor& other) { return div_(other); }
  Tensor& operator+=(const Scalar& other);
  Tensor& operator-=(const Scalar& other);
  Tensor& operator*=(const Scalar& other);
  Tensor& operator/=(const Scalar& other);

  // ---- math, scans, statistics, sorting, indexing and sampling (also in ops.h) ----
  Tensor rsqrt() const;
  Tensor erf() const;
  Tensor cumsum(int64_t dim) const;
  Tensor logsumexp(const IntList& dims, bool keepdim = false) const;
  Tensor sum(const IntList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(const IntList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor var(const IntList& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const IntList& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// Adds src's elements into this tensor at `index` along `dim`, in place.
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false,
                     std::optional<Generator> generator = std::nullopt) const;

  // ---- new_* factories: keep this tensor's device and dtype ------------------
  Tensor new_empty(const IntList& shape) const;
  Tensor new_zeros(const IntList& shape) const;
  Tensor new_ones(const IntList& shape) const;
  Tensor new_full(const IntList& shape, const Scalar& value) const;
  /// x.new_tensor(data): the data with this tensor's dtype, on its device.
  Tensor new_tensor(const TensorData& data) const;

  // ---- autograd (src/autograd) ----------------------------------------------
  /// True for a leaf that asked for gradients and for every result computed from one.
  bool requires_grad() const;
  /// Makes a leaf require grad (or not). Integer tensors cannot; non-leaves cannot stop.
  Tensor& requires_grad_(bool requires_grad = true);
  /// True unless the tensor was computed by a recorded op (it has no grad_fn).
  bool is_leaf() const;
  /// The accumulated gradient; undefined until a backward pass sets it.
  const Tensor& grad() const;
  /// The gradient slot itself: assign {} to clear it, or a tensor to replace it (of this
  /// tensor's size, dtype and device: a backward pass that accumulates into another one
  /// raises PyTorch's "assigned grad has data of a different size/type").
  Tensor& mutable_grad() const;
  /// The node that computed this tensor (null for leaves); ->name() as PyTorch's ("MulBackward0").
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// The same data outside the graph (shares storage and version counter).
  Tensor detach() const;
  /// Keeps the gradient of a non-leaf in grad() after backward.
  void retain_grad() const;
  bool retains_grad() const;
  /// Calls `hook` with this tensor's gradient during backward; a defined result replaces it
  /// and must have the gradient's size, dtype and device (else Error, "hook ... has changed
  /// the size of value", as PyTorch).
  unsigned register_hook(std::function<Tensor(const Tensor&)> hook) const;
  template <typename F>
  requires std::is_void_v<std::invoke_result_t<F, const Tensor&>>
  unsigned register_hook(F hook) const {
    return register_hook(std::function<Tensor(const Tensor&)>([h = std::move(hook)](const Tensor& g) {
      h(g);
      return Tensor();
    }));
  }
  /// Removes hook `handle`; a hook already removed is a no-op (PyTorch's handle.remove()).
  void remove_hook(unsigned handle) const;
  /// Leaves only: `hook(tensor)` runs after the gradient is accumulated into grad().
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const;
  /// Computes the gradient of this tensor w.r.t. the graph's leaves (autograd::backward).
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// Bumped by every in-place change of the data; shared by views of the same storage.
  uint32_t _version() const;
  /// Which output of grad_fn() this tensor is.
  uint32_t output_nr() const;

  // Transformer ops (ops.h has their free forms).
  /// self.select(dim, index[k]) += alpha * source.select(dim, k) for every k, in index order
  /// (deterministic on every backend); index is a 1-D (or 0-d) int64/int32 tensor.
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;

  detail::TensorImpl* impl() const noexcept { return impl_.get(); }
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const noexcept { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace ember
