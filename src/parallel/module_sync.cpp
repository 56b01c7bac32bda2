#include "parallel/module_sync.h"

#include <map>
#include <tuple>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/distributed.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::nn::parallel::detail {

namespace dist = ember::distributed;

namespace {

/// Every rank's `values` (the same length on all), gathered on `device`, as rows.
std::vector<std::vector<int64_t>> all_gather_values(const std::vector<int64_t>& values, Device device) {
  Tensor mine = empty({static_cast<int64_t>(values.size())}, kInt64);
  std::copy(values.begin(), values.end(), mine.data_ptr<int64_t>());
  mine = mine.to(device);
  std::vector<Tensor> gathered;
  for (int r = 0; r < dist::get_world_size(); ++r) gathered.push_back(empty_like(mine));
  dist::all_gather(gathered, mine);
  std::vector<std::vector<int64_t>> rows;
  for (const Tensor& t : gathered) rows.push_back(t.cpu().to_vector<int64_t>());
  return rows;
}

std::string sizes_of(const std::vector<int64_t>& record, size_t at) {
  IntList sizes(record.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                record.begin() + static_cast<std::ptrdiff_t>(at) + 1 + record[at]);
  return ember::detail::cat(ember::detail::IntListPrinter{sizes});
}

}  // namespace

void verify_params_across_processes(const std::vector<Tensor>& params, const std::vector<std::string>& names) {
  NoGradGuard no_grad;
  const Device device = params.front().device();
  const int rank = dist::get_rank();
  int64_t max_dim = 0;
  for (const Tensor& p : params) max_dim = std::max<int64_t>(max_dim, p.dim());
  auto counts = all_gather_values({static_cast<int64_t>(params.size()), max_dim}, device);
  for (size_t r = 0; r < counts.size(); ++r) {
    EMBER_CHECK(counts[r][0] == static_cast<int64_t>(params.size()), ValueError,
                "DDP expects same model across all ranks, but Rank ", rank, " has ", params.size(),
                " params, while rank ", r, " has inconsistent ", counts[r][0], " params.");
    max_dim = std::max(max_dim, counts[r][1]);
  }
  // One record per parameter: its dim, then its sizes, padded to the largest dim of all.
  const size_t width = static_cast<size_t>(max_dim) + 1;
  std::vector<int64_t> record(params.size() * width, 0);
  for (size_t p = 0; p < params.size(); ++p) {
    record[p * width] = params[p].dim();
    for (int64_t d = 0; d < params[p].dim(); ++d) record[p * width + 1 + static_cast<size_t>(d)] = params[p].size(d);
  }
  auto records = all_gather_values(record, device);
  for (size_t p = 0; p < params.size(); ++p) {
    for (size_t r = 1; r < records.size(); ++r) {
      bool same = std::equal(records[r].begin() + static_cast<std::ptrdiff_t>(p * width),
                             records[r].begin() + static_cast<std::ptrdiff_t>((p + 1) * width),
                             records[0].begin() + static_cast<std::ptrdiff_t>(p * width));
      EMBER_CHECK(same, ValueError, "DDP expects same model across all ranks, but params[", p, "] (", names[p],
                  ") in process ", r, " with sizes ", sizes_of(records[r], p * width),
                  " appears not to match sizes of the same param in process 0 (", sizes_of(records[0], p * width),
                  ").");
    }
  }
}

void broadcast_coalesced(const std::vector<Tensor>& tensors, int src) {
  NoGradGuard no_grad;
  using Key = std::tuple<int, int, int>;  // device type, device index, dtype
  std::map<Key, std::vector<Tensor>> groups;
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    groups[{static_cast<int>(t.device().type()), t.device().index(), static_cast<int>(t.dtype())}].push_back(
        t.detach());
  }
  const bool receiving = dist::get_rank() != src;
  for (auto& [key, group] : groups) {
    if (group.size() == 1 && group.front().is_contiguous()) {
      dist::broadcast(group.front(), src);
      continue;
    }
    std::vector<Tensor> flat_parts;
    for (const Tensor& t : group) flat_parts.push_back(t.reshape({-1}));
    Tensor flat = ember::cat(flat_parts);
    dist::broadcast(flat, src);
    if (!receiving) continue;
    int64_t offset = 0;
    for (Tensor& t : group) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace ember::nn::parallel::detail
