// The Reducer; see Note [DDP buckets] and Note [DDP iteration] in reducer.h.
#include "parallel/reducer.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::nn::parallel::detail {

namespace dist = ember::distributed;

std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(const std::vector<Tensor>& tensors,
                                                                   const std::vector<size_t>& bucket_size_limits) {
  EMBER_CHECK(!bucket_size_limits.empty(), ValueError, "compute_bucket_assignment_by_size: no bucket size limits");
  struct Open {
    std::vector<size_t> indices;
    size_t bytes = 0;
    size_t limit_index = 0;
  };
  using Key = std::tuple<int, int, int>;  // device type, device index, dtype
  std::map<Key, Open> open;
  std::vector<std::vector<size_t>> closed;
  for (size_t k = tensors.size(); k-- > 0;) {
    const Tensor& t = tensors[k];
    EMBER_CHECK(t.defined(), ValueError, "compute_bucket_assignment_by_size: tensor ", k, " is undefined");
    Key key{static_cast<int>(t.device().type()), t.device().index(), static_cast<int>(t.dtype())};
    Open& bucket = open[key];
    bucket.indices.push_back(k);
    bucket.bytes += t.nbytes();
    size_t limit = bucket_size_limits[std::min(bucket.limit_index, bucket_size_limits.size() - 1)];
    if (bucket.bytes >= limit) {
      closed.push_back(std::move(bucket.indices));
      bucket.indices.clear();
      bucket.bytes = 0;
      ++bucket.limit_index;
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.indices.empty()) closed.push_back(std::move(bucket.indices));
  }
  // Backward fills buckets from the last parameters' to the first's.
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return closed;
}

namespace {

bool aliases(const Tensor& grad, const Tensor& view) {
  return grad.defined() && grad.data_ptr() == view.data_ptr() && grad.sizes() == view.sizes() &&
         grad.strides() == view.strides() && grad.device() == view.device() && grad.dtype() == view.dtype();
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

std::shared_ptr<Reducer> Reducer::make(std::vector<Tensor> params, std::vector<std::string> names,
                                       std::vector<std::vector<size_t>> bucket_indices, bool find_unused_parameters,
                                       bool gradient_as_bucket_view) {
  std::shared_ptr<Reducer> reducer(new Reducer(std::move(params), std::move(names), std::move(bucket_indices),
                                               find_unused_parameters, gradient_as_bucket_view));
  reducer->register_hooks();
  return reducer;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 std::vector<std::vector<size_t>> bucket_indices, bool find_unused_parameters,
                 bool gradient_as_bucket_view)
    : params_(std::move(params)),
      names_(std::move(names)),
      bucket_indices_(std::move(bucket_indices)),
      find_unused_parameters_(find_unused_parameters),
      gradient_as_bucket_view_(gradient_as_bucket_view),
      slots_(params_.size()),
      ready_(params_.size(), false),
      local_used_(params_.size(), 0) {
  NoGradGuard no_grad;
  std::vector<bool> placed(params_.size(), false);
  for (size_t b = 0; b < bucket_indices_.size(); ++b) {
    const auto& indices = bucket_indices_[b];
    EMBER_CHECK(!indices.empty(), ValueError, "DistributedDataParallel: bucket ", b, " is empty");
    Bucket bucket;
    int64_t numel = 0;
    for (size_t index : indices) {
      EMBER_CHECK(index < params_.size() && !placed[index], ValueError, "DistributedDataParallel: bucket ", b,
                  " names parameter ", index, ", which is out of range or in another bucket");
      const Tensor& p = params_[index];
      EMBER_CHECK(p.device() == params_[indices.front()].device() && p.dtype() == params_[indices.front()].dtype(),
                  ValueError, "DistributedDataParallel: bucket ", b, " mixes devices or dtypes");
      placed[index] = true;
      numel += p.numel();
    }
    const Tensor& first = params_[indices.front()];
    bucket.flat = zeros({numel}, TensorOptions(first.dtype()).device(first.device()));
    int64_t offset = 0;
    for (size_t position = 0; position < indices.size(); ++position) {
      const Tensor& p = params_[indices[position]];
      bucket.variables.push_back(indices[position]);
      bucket.views.push_back(bucket.flat.narrow(0, offset, p.numel()).view(p.sizes()));
      slots_[indices[position]] = Slot{b, position};
      offset += p.numel();
    }
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    EMBER_CHECK(placed[i], ValueError, "DistributedDataParallel: parameter ", i, " (", names_[i], ") is in no bucket");
  }
  if (gradient_as_bucket_view_) {
    // As PyTorch: gradients that exist already move into their buckets now.
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& grad = params_[i].mutable_grad();
      if (!grad.defined()) continue;
      Tensor view = buckets_[slots_[i].bucket].views[slots_[i].position];
      view.copy_(grad);
      grad = view;
    }
  }
}

Reducer::~Reducer() { wait_for_pending_work(); }

void Reducer::wait_for_pending_work() noexcept {
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (...) {
      // Reported (or to be reported) by the iteration that issued it.
    }
    bucket.work.reset();
  }
  if (local_used_work_) {
    try {
      local_used_work_->wait();
    } catch (...) {
    }
    local_used_work_.reset();
  }
}

void Reducer::register_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto reducer = weak.lock()) {
        std::lock_guard lock(reducer->mutex_);
        reducer->autograd_hook(i);
      }
    });
  }
}

void Reducer::ensure_prior_reduction_finished() {
  std::lock_guard lock(mutex_);
  if (!require_finalize_) return;
  std::vector<std::string> indices, names;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_[i]) continue;
    indices.push_back(std::to_string(i));
    names.push_back(names_[i]);
  }
  const char* outputs_not_used = "making sure all `forward` function outputs participate in calculating loss. ";
  const char* ddp_bug =
      "\nIf you already have done the above, then the distributed data parallel module wasn't able to locate the "
      "output tensors in the return value of your module's `forward` function. Please include the loss function and "
      "the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, "
      "iterable).";
  std::string message =
      "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates "
      "that your module has parameters that were not used in producing loss. ";
  if (!find_unused_parameters_) {
    message += ember::detail::cat(
        "You can enable unused parameter detection by passing `DDPOptions().find_unused_parameters(true)` "
        "to `ember::nn::parallel::DistributedDataParallel`, and by \n",
        outputs_not_used, ddp_bug);
  } else {
    message += ember::detail::cat(
        "Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` outputs "
        "participate in computing loss. You can fix this by ",
        outputs_not_used, ddp_bug);
  }
  int rank = dist::get_rank();
  message +=
      ember::detail::cat("\nParameter indices which did not receive grad for rank ", rank, ": ", join(indices, " "),
                         "\nParameters which did not receive grad for rank ", rank, ": ", join(names, ", "));
  throw Error(message);
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::lock_guard lock(mutex_);
  expect_autograd_hooks_ = true;
  require_finalize_ = true;
  next_bucket_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.variables.size();
    bucket.writers.clear();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(local_used_.begin(), local_used_.end(), 0);
  local_used_work_.reset();
  local_used_is_reduced_ = false;
  has_marked_unused_parameters_ = false;
  unused_parameters_.clear();
  if (find_unused_parameters_) search_unused_parameters(outputs);
}

// PyTorch's search_unused_parameters: the parameters whose AccumulateGrad the graph of
// `outputs` does not reach will get no gradient.
void Reducer::search_unused_parameters(const std::vector<Tensor>& outputs) {
  std::unordered_map<const ember::detail::TensorImpl*, size_t> index_of;
  for (size_t i = 0; i < params_.size(); ++i) index_of.emplace(params_[i].impl(), i);
  std::vector<bool> reached(params_.size(), false);
  std::vector<autograd::Node*> stack;
  std::unordered_set<autograd::Node*> seen;
  for (const Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (auto fn = out.grad_fn()) {
      if (seen.insert(fn.get()).second) stack.push_back(fn.get());
    } else if (auto it = index_of.find(out.impl()); it != index_of.end()) {
      reached[it->second] = true;  // the output is a parameter itself
    }
  }
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (auto* leaf = dynamic_cast<autograd::AccumulateGrad*>(node)) {
      if (auto it = index_of.find(leaf->variable().impl()); it != index_of.end()) reached[it->second] = true;
    }
    for (const autograd::Edge& e : node->next_edges()) {
      if (e.is_valid() && seen.insert(e.function.get()).second) stack.push_back(e.function.get());
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!reached[i]) unused_parameters_.push_back(i);
  }
}

void Reducer::autograd_hook(size_t index) {
  if (!expect_autograd_hooks_) return;  // no_sync(), or no forward() since the last reduction
  if (find_unused_parameters_) local_used_[index] = 1;
  if (!has_marked_unused_parameters_) {
    has_marked_unused_parameters_ = true;
    for (size_t unused : unused_parameters_) mark_variable_ready(unused);
  }
  mark_variable_ready(index);
}

void Reducer::mark_variable_ready(size_t index) {
  EMBER_CHECK(!ready_[index], Error,
              "Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) "
              "Use of a module parameter outside the `forward` function. 2) Reused parameters in multiple reentrant "
              "backward passes. Parameter at index ",
              index, " with name ", names_[index],
              " has been marked as ready twice. This means that multiple autograd engine  hooks have fired for this "
              "particular parameter during this iteration.");
  ready_[index] = true;
  Bucket& bucket = buckets_[slots_[index].bucket];
  copy_grad_to_bucket(bucket, slots_[index].position);
  if (--bucket.pending == 0) launch_ready_buckets();
  if (next_bucket_ == buckets_.size()) {
    if (find_unused_parameters_) {
      Tensor used = empty({static_cast<int64_t>(local_used_.size())}, kInt32);
      std::copy(local_used_.begin(), local_used_.end(), used.data_ptr<int32_t>());
      local_used_reduced_ = used.to(params_.front().device());
      local_used_work_ = dist::all_reduce(local_used_reduced_, dist::ReduceOp::SUM, /*async_op=*/true);
    }
    autograd::queue_callback([self = shared_from_this()] {
      std::lock_guard lock(self->mutex_);
      self->finalize_backward();
    });
  }
}

namespace {

// The id of the capture `stream` is in; 0 when it is not capturing.
uint64_t capture_of(const cuda::Stream& stream) {
  auto [status, id] = ember::detail::backend().capture_status(stream.state()->native());
  return status == ember::detail::CaptureStatus::None ? 0 : id;
}

}  // namespace

void Reducer::copy_grad_to_bucket(Bucket& bucket, size_t position) {
  NoGradGuard no_grad;
  if (bucket.flat.is_cuda()) {
    cuda::Stream current = cuda::current_stream(bucket.flat.get_device());
    if (std::find(bucket.writers.begin(), bucket.writers.end(), current) == bucket.writers.end()) {
      // A step captured whole (the CUDA note's DDP capture) may not wait on the last eager
      // step's event (CUDA's capture isolation): the capture began after that step's work
      // (warm-up, then a synchronize, as torch.cuda.graph does), and within the capture the
      // release is on its stream.
      const uint64_t capture = capture_of(current);
      if (bucket.released && (capture == 0 || bucket.released_capture == capture)) current.wait_event(*bucket.released);
      bucket.writers.push_back(current);
    }
  }
  Tensor view = bucket.views[position];
  Tensor& grad = params_[bucket.variables[position]].mutable_grad();
  if (!grad.defined()) {
    view.zero_();  // an unused parameter contributes zeros
    return;
  }
  if (aliases(grad, view)) return;  // gradient_as_bucket_view: accumulated in place
  view.copy_(grad);
  if (gradient_as_bucket_view_) grad = view;
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_++];
    if (bucket.flat.is_cuda()) {
      cuda::Stream current = cuda::current_stream(bucket.flat.get_device());
      for (const cuda::Stream& writer : bucket.writers) {
        if (!(writer == current)) current.wait_stream(writer);
      }
    }
    bucket.work = dist::all_reduce(bucket.flat, dist::ReduceOp::AVG, /*async_op=*/true);
  }
}

bool Reducer::globally_unused(size_t index) {
  if (!local_used_is_reduced_) {
    local_used_work_->wait();
    local_used_reduced_ = local_used_reduced_.cpu();
    local_used_is_reduced_ = true;
  }
  return local_used_reduced_.data_ptr<int32_t>()[index] == 0;
}

void Reducer::finalize_backward() {
  expect_autograd_hooks_ = false;
  require_finalize_ = false;
  std::exception_ptr failure;
  for (Bucket& bucket : buckets_) {
    try {
      bucket.work->wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    bucket.work.reset();
  }
  if (failure) {
    wait_for_pending_work();
    std::rethrow_exception(failure);
  }
  NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    for (size_t position = 0; position < bucket.variables.size(); ++position) {
      size_t index = bucket.variables[position];
      if (find_unused_parameters_ && local_used_[index] == 0 && globally_unused(index)) continue;
      const Tensor& param = params_[index];
      const Tensor& view = bucket.views[position];
      Tensor& grad = param.mutable_grad();
      if (gradient_as_bucket_view_) {
        if (!grad.defined()) grad = view;  // used elsewhere, not here
      } else if (!grad.defined()) {
        grad = autograd::clone_obeying_layout(view, param);
      } else {
        grad.copy_(view);
      }
    }
    if (bucket.flat.is_cuda()) {
      cuda::Stream current = cuda::current_stream(bucket.flat.get_device());
      bucket.released.emplace();
      bucket.released->record(current);
      bucket.released_capture = capture_of(current);
    }
  }
  if (local_used_work_) {
    if (!local_used_is_reduced_) local_used_work_->wait();
    local_used_work_.reset();
  }
}

}  // namespace ember::nn::parallel::detail
