// The Reducer: averages a DistributedDataParallel module's gradients over the ranks during
// backward, in buckets (PyTorch's c10d::Reducer, without its comm hooks, static graphs,
// bucket rebuilding and join support).
//
// Note [DDP buckets]
// Parameters are walked from last to first (the order backward usually produces their
// gradients in) and packed, per (device, dtype), into buckets: the first bucket closes
// once it holds at least 1 MiB, every later one at bucket_cap_mb. A bucket owns one flat
// tensor; each of its parameters has a view of it with the parameter's shape. Invariant:
// a bucket's all-reduce is issued only after every earlier bucket's, so all ranks issue
// the same collectives in the same order (Note [Collective ordering]) whatever order
// their gradients arrive in.
//
// Note [DDP iteration]
//  1. forward() (caller's thread): ensure_prior_reduction_finished(), then, with grad
//     mode on outside no_sync(), prepare_for_backward(): hooks are expected, every bucket
//     waits for all its parameters (find_unused_parameters: those the graph of the output
//     does not reach are unused, and are marked ready at the first hook).
//  2. A parameter's post-accumulate-grad hook (the backward thread, under the stream of
//     its AccumulateGrad) copies .grad into its bucket view (zeros for an unused one).
//     When its bucket is complete, the ready buckets are all-reduced (AVG, async) on the
//     current stream: the collective starts after the copies (Note [Collective ordering]
//     (A)); streams other than the current one that wrote into the bucket are waited for
//     first. The first time the last bucket is issued, finalize_backward is queued.
//  3. finalize_backward (autograd::queue_callback: after the last node, on the caller's
//     thread and streams, which by then wait for every stream of the pass) waits for each
//     bucket's work (gloo: on the host; nccl: the current stream waits) and copies the
//     averages into .grad on the caller's current stream (gradient_as_bucket_view: .grad
//     is the view already). A parameter no rank used keeps its .grad untouched. Then an
//     event on the caller's stream marks the buckets free: the next iteration's copies
//     into them wait for it.
// A backward pass that leaves a bucket incomplete never queues finalize_backward; the next
// forward() then reports the parameters that got no gradient.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ember/distributed.h"
#include "ember/stream.h"
#include "ember/tensor.h"

namespace ember::nn::parallel::detail {

/// PyTorch's default size of the first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES).
inline constexpr size_t kDefaultFirstBucketBytes = size_t{1} << 20;

/// Note [DDP buckets]: indices into `tensors`, bucket by bucket, each bucket's in the order
/// its views lie in it (decreasing index). Bucket k of a (device, dtype) group closes once
/// it holds at least bucket_size_limits[min(k, size - 1)] bytes. Buckets are ordered by
/// their largest index, decreasing (the order backward fills them in).
std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(const std::vector<Tensor>& tensors,
                                                                   const std::vector<size_t>& bucket_size_limits);

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  /// Builds the buckets and registers a post-accumulate-grad hook on every parameter
  /// (the hooks hold the reducer weakly: once it is gone they do nothing).
  static std::shared_ptr<Reducer> make(std::vector<Tensor> params, std::vector<std::string> names,
                                       std::vector<std::vector<size_t>> bucket_indices, bool find_unused_parameters,
                                       bool gradient_as_bucket_view);
  /// Waits for collectives still in flight.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// forward(), grad mode on: throws Error ("Expected to have finished reduction in the
  /// prior iteration ...") when the last prepared backward pass did not reduce every bucket.
  void ensure_prior_reduction_finished();
  /// forward(), grad mode on and outside no_sync(): the next backward pass reduces.
  /// `outputs` (find_unused_parameters only) are where the graph search starts.
  void prepare_for_backward(const std::vector<Tensor>& outputs);

  const std::vector<std::vector<size_t>>& bucket_indices() const noexcept { return bucket_indices_; }

 private:
  struct Bucket {
    std::vector<size_t> variables;  // parameter indices, in layout order
    Tensor flat;
    std::vector<Tensor> views;  // one per variable, the parameter's shape
    size_t pending = 0;         // gradients still to come this iteration
    std::shared_ptr<ember::distributed::Work> work;
    std::vector<cuda::Stream> writers;    // streams that wrote into `flat` this iteration
    std::optional<cuda::Event> released;  // the last finalize's reads of `flat`
    uint64_t released_capture = 0;        // the capture it was recorded in; 0: none
  };
  struct Slot {
    size_t bucket = 0, position = 0;
  };

  Reducer(std::vector<Tensor> params, std::vector<std::string> names, std::vector<std::vector<size_t>> bucket_indices,
          bool find_unused_parameters, bool gradient_as_bucket_view);
  void register_hooks();
  // Each runs with mutex_ held.
  void autograd_hook(size_t index);
  void mark_variable_ready(size_t index);
  void copy_grad_to_bucket(Bucket& bucket, size_t position);
  void launch_ready_buckets();
  void search_unused_parameters(const std::vector<Tensor>& outputs);
  void finalize_backward();
  bool globally_unused(size_t index);
  void wait_for_pending_work() noexcept;

  const std::vector<Tensor> params_;
  const std::vector<std::string> names_;
  const std::vector<std::vector<size_t>> bucket_indices_;
  const bool find_unused_parameters_;
  const bool gradient_as_bucket_view_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;  // by parameter index

  std::mutex mutex_;
  bool expect_autograd_hooks_ = false;
  bool require_finalize_ = false;
  size_t next_bucket_ = 0;
  std::vector<bool> ready_;  // parameters marked ready this iteration
  std::vector<size_t> unused_parameters_;
  bool has_marked_unused_parameters_ = false;
  // find_unused_parameters: which parameters this rank used, all-reduced after the last
  // bucket so that a parameter no rank used keeps its .grad.
  std::vector<int32_t> local_used_;
  Tensor local_used_reduced_;
  std::shared_ptr<ember::distributed::Work> local_used_work_;
  bool local_used_is_reduced_ = false;
};

}  // namespace ember::nn::parallel::detail
