// Scatter, Gather and Broadcast as autograd Functions (Note [Streams of DataParallel's copies]).
#include "parallel/comm.h"

#include <map>
#include <optional>
#include <typeinfo>

#include "autograd/autograd_meta.h"
#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::detail::parallel {
namespace {

using autograd::AutogradContext;

// PyTorch's buffer_size for broadcast_coalesced and reduce_add_coalesced.
constexpr int64_t kBucketBytes = int64_t{10} << 20;

Device device_of(int index) { return index < 0 ? Device(kCPU) : Device(kCUDA, index); }

std::vector<cuda::Stream> current_streams(const std::vector<int>& devices) {
  std::vector<cuda::Stream> out;
  out.reserve(devices.size());
  for (int d : devices) out.push_back(cuda::current_stream(d));
  return out;
}

// Positions of `tensors` grouped into buckets of one dtype and at most kBucketBytes (a
// larger tensor alone), each in order of position.
std::vector<std::vector<size_t>> buckets_of(const std::vector<Tensor>& tensors, const std::vector<size_t>& positions) {
  std::vector<std::vector<size_t>> buckets;
  std::map<DType, std::pair<size_t, int64_t>> open;  // dtype -> (bucket, bytes)
  for (size_t i : positions) {
    const auto bytes = static_cast<int64_t>(tensors[i].nbytes());
    auto it = open.find(tensors[i].dtype());
    if (it == open.end() || it->second.second + bytes > kBucketBytes) {
      buckets.push_back({i});
      open[tensors[i].dtype()] = {buckets.size() - 1, bytes};
    } else {
      buckets[it->second.first].push_back(i);
      it->second.second += bytes;
    }
  }
  return buckets;
}

std::vector<size_t> all_positions(size_t n) {
  std::vector<size_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// The bucket's tensors flattened into one 1-d tensor on their device.
Tensor flatten(const std::vector<Tensor>& tensors, const std::vector<size_t>& bucket) {
  if (bucket.size() == 1) return tensors[bucket[0]].reshape({-1});
  std::vector<Tensor> parts;
  parts.reserve(bucket.size());
  for (size_t i : bucket) parts.push_back(tensors[i].reshape({-1}));
  return ember::cat(parts, 0);
}

// Views of `flat` shaped as the bucket's tensors, written to out[i].
void unflatten(const Tensor& flat, const std::vector<Tensor>& shapes, const std::vector<size_t>& bucket,
               std::vector<Tensor>& out) {
  int64_t offset = 0;
  for (size_t i : bucket) {
    out[i] = flat.narrow(0, offset, shapes[i].numel()).view(shapes[i].sizes());
    offset += shapes[i].numel();
  }
}

// Concatenates `tensors` along `dim` on `device`; each copy reads on source_streams[i]
// when given (a backward reading gradients), else on the current streams.
Tensor gather_on(const std::vector<Tensor>& tensors, int device, int64_t dim,
                 const std::vector<cuda::Stream>* source_streams) {
  EMBER_CHECK(!tensors.empty(), ValueError, "gather: expected at least one tensor");
  const Tensor& first = tensors[0];
  IntList sizes = first.sizes();
  sizes[static_cast<size_t>(dim)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), ValueError, "gather: tensor ", i, " has ",
                t.dim(), " dimensions and dtype ", t.dtype(), ", but tensor 0 has ", first.dim(), " and ",
                first.dtype());
    for (int64_t d = 0; d < t.dim(); ++d) {
      EMBER_CHECK(d == dim || t.size(d) == first.size(d), ValueError, "gather: tensor ", i, " has shape ",
                  IntListPrinter{t.sizes()}, ", which differs from tensor 0's ", IntListPrinter{first.sizes()},
                  " outside dimension ", dim);
    }
    sizes[static_cast<size_t>(dim)] += t.size(dim);
  }
  Tensor out = empty(sizes, TensorOptions(first.dtype()).device(device_of(device)));
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::optional<cuda::StreamGuard> guard;
    if (source_streams != nullptr && tensors[i].is_cuda()) guard.emplace((*source_streams)[i]);
    out.narrow(dim, offset, tensors[i].size(dim)).copy_(tensors[i]);
    offset += tensors[i].size(dim);
  }
  return out;
}

// Chunk i copied to devices[i].
std::vector<Tensor> scatter_chunks(const std::vector<Tensor>& chunks, const std::vector<int>& devices) {
  std::vector<Tensor> out;
  out.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) out.push_back(chunks[i].to(device_of(devices[i]), /*non_blocking=*/true));
  return out;
}

std::vector<Tensor> flat_list(std::vector<std::vector<Tensor>> per_device) {
  std::vector<Tensor> out;
  for (auto& list : per_device) out.insert(out.end(), list.begin(), list.end());
  return out;
}

// The autograd Functions: the node's name is the struct's.
struct Scatter {};
struct Gather {};
struct Broadcast {};

}  // namespace

std::vector<Tensor> scatter(const Tensor& input, const std::vector<int>& devices, int64_t dim) {
  EMBER_CHECK(input.defined(), ValueError, "scatter: the input is an undefined tensor");
  EMBER_CHECK(!devices.empty(), ValueError, "scatter: expected at least one device");
  const int64_t d = wrap_dim(dim, input.dim());
  auto forward = [&](AutogradContext* ctx) {
    std::vector<Tensor> chunks = input.chunk(static_cast<int64_t>(devices.size()), d);
    std::vector<int> used(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(chunks.size()));
    ctx->saved_data["input_device"] = input.is_cuda() ? input.get_device() : -1;
    ctx->saved_data["streams"] = current_streams(used);
    return scatter_chunks(chunks, used);
  };
  auto backward = [d](AutogradContext* ctx, std::vector<Tensor> grads) -> std::vector<Tensor> {
    const auto streams = std::any_cast<std::vector<cuda::Stream>>(ctx->saved_data.at("streams"));
    return {gather_on(grads, std::any_cast<int>(ctx->saved_data.at("input_device")), d, &streams)};
  };
  return autograd::detail::apply_function(typeid(Scatter), {input}, {true}, forward, backward);
}

Tensor gather(const std::vector<Tensor>& tensors, int device, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), ValueError, "gather: expected at least one tensor");
  for (const Tensor& t : tensors) EMBER_CHECK(t.defined(), ValueError, "gather: got an undefined tensor");
  // Scalars (a loss computed in each replica) are gathered as a vector, as PyTorch does.
  const bool scalars = tensors[0].dim() == 0;
  const int64_t d = scalars ? 0 : wrap_dim(dim, tensors[0].dim());
  auto forward = [&](AutogradContext* ctx) -> std::vector<Tensor> {
    std::vector<int> devices;
    IntList sizes;
    std::vector<Tensor> parts;
    for (const Tensor& t : tensors) {
      devices.push_back(t.is_cuda() ? t.get_device() : -1);
      parts.push_back(scalars && t.dim() == 0 ? t.unsqueeze(0) : t);
      sizes.push_back(parts.back().size(d));
    }
    ctx->saved_data["devices"] = devices;
    ctx->saved_data["sizes"] = sizes;
    return {gather_on(parts, device, d, nullptr)};
  };
  auto backward = [d, scalars](AutogradContext* ctx, std::vector<Tensor> grads) -> std::vector<Tensor> {
    const auto devices = std::any_cast<std::vector<int>>(ctx->saved_data.at("devices"));
    std::vector<Tensor> parts =
        scatter_chunks(grads[0].split(std::any_cast<IntList>(ctx->saved_data.at("sizes")), d), devices);
    if (scalars) {
      for (Tensor& p : parts) p = p.squeeze(0);
    }
    return parts;
  };
  return autograd::detail::apply_function(typeid(Gather), tensors, std::vector<bool>(tensors.size(), true), forward,
                                          backward)
      .at(0);
}

std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<int>& devices) {
  EMBER_CHECK(!devices.empty(), ValueError, "broadcast: expected at least one device");
  const Device source = device_of(devices[0]);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined() && tensors[i].device() == source, ValueError, "broadcast: tensor ", i,
                " is not on ", source, " (devices[0])");
  }
  NoGradGuard no_grad;
  std::vector<std::vector<Tensor>> out(devices.size(), std::vector<Tensor>(tensors.size()));
  out[0] = tensors;
  for (const auto& bucket : buckets_of(tensors, all_positions(tensors.size()))) {
    const Tensor flat = flatten(tensors, bucket);
    for (size_t d = 1; d < devices.size(); ++d) unflatten(flat.to(device_of(devices[d])), tensors, bucket, out[d]);
  }
  return out;
}

std::vector<std::vector<Tensor>> broadcast(const std::vector<Tensor>& tensors, const std::vector<int>& devices) {
  const size_t n = tensors.size();
  auto forward = [&](AutogradContext* ctx) {
    std::vector<std::vector<Tensor>> copies = broadcast_coalesced(tensors, devices);
    // Aliases on devices[0], so that the copies there get their own history.
    for (Tensor& t : copies[0]) t = autograd::alias_of(t);
    for (size_t i = 0; i < n; ++i) {
      if (tensors[i].requires_grad()) continue;
      for (auto& list : copies) ctx->mark_non_differentiable({list[i]});
    }
    ctx->saved_data["streams"] = current_streams(devices);
    return flat_list(std::move(copies));
  };
  // PyTorch's ReduceAddCoalesced: each tensor's gradients summed on devices[0].
  auto backward = [n, devices](AutogradContext* ctx, std::vector<Tensor> grads) -> std::vector<Tensor> {
    const auto streams = std::any_cast<std::vector<cuda::Stream>>(ctx->saved_data.at("streams"));
    const Device destination = device_of(devices[0]);
    std::vector<size_t> needed;
    for (size_t i = 0; i < n; ++i) {
      if (ctx->needs_input_grad(i)) needed.push_back(i);
    }
    const std::vector<Tensor> on_destination(grads.begin(), grads.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<Tensor> result(n);
    for (const auto& bucket : buckets_of(on_destination, needed)) {
      Tensor sum;
      for (size_t d = 0; d < devices.size(); ++d) {
        const std::vector<Tensor> device_grads(grads.begin() + static_cast<std::ptrdiff_t>(d * n),
                                               grads.begin() + static_cast<std::ptrdiff_t>((d + 1) * n));
        Tensor moved;
        {
          cuda::StreamGuard guard(streams[d]);
          moved = flatten(device_grads, bucket).to(destination);
        }
        if (d == 0) sum = moved;
        else if (d == 1) sum = sum + moved;  // not in place: sum may be a view of an incoming gradient
        else sum.add_(moved);
      }
      unflatten(sum, on_destination, bucket, result);
    }
    return result;
  };
  std::vector<Tensor> flat =
      autograd::detail::apply_function(typeid(Broadcast), tensors, std::vector<bool>(n, true), forward, backward);
  std::vector<std::vector<Tensor>> out(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    out[d].assign(flat.begin() + static_cast<std::ptrdiff_t>(d * n),
                  flat.begin() + static_cast<std::ptrdiff_t>((d + 1) * n));
  }
  return out;
}

}  // namespace ember::detail::parallel
