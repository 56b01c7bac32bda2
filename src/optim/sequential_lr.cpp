// SequentialLR, as PyTorch 2.x's (its checks, messages, initial undo and restarts).
#include <limits>

#include "ember/errors.h"
#include "ember/optim/lr_scheduler.h"
#include "optim/scheduler_state.h"

namespace ember::optim {

using ember::detail::cat;
using ember::detail::optim::SchedulerStateReader;

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  EMBER_CHECK(!schedulers_.empty(), ValueError, "SequentialLR expects at least one scheduler, but got no scheduler.");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const LRScheduler* s = schedulers_[i].get();
    EMBER_CHECK(s != nullptr, ValueError, "SequentialLR got a null scheduler at index ", i);
    EMBER_CHECK(dynamic_cast<const ReduceLROnPlateau*>(s) == nullptr, ValueError,
                "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs to be "
                "specified when calling `step`, but got one at index ",
                i, " in the given schedulers sequence.");
    EMBER_CHECK(&s->optimizer() == &optimizer, ValueError,
                "SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler ",
                s->type_name(), " at index ", i, " with a different optimizer.");
  }
  EMBER_CHECK(milestones_.size() == schedulers_.size() - 1, ValueError,
              "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
              "milestone points, but got number of schedulers ",
              schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    EMBER_CHECK(optimizer.initial_lr(g).has_value(), ValueError, "param 'initial_lr' is not specified in param_groups[",
                g, "]");
  }
  // Undo the schedulers' initial steps (a scheduler listed twice, twice), reset the learning
  // rates to their initial values and make the first scheduler's initial step; if any of it
  // fails, all of it is put back.
  std::vector<LRScheduler*> leaves;
  collect_leaves(*this, leaves);
  size_t undone = 0;
  auto redo = [&] {
    for (size_t i = 0; i < undone; ++i) ++leaves[i]->last_epoch_;
  };
  for (LRScheduler* s : leaves) {
    if (s->last_epoch_ == std::numeric_limits<int64_t>::min()) {
      redo();
      throw ValueError(cat("SequentialLR: cannot undo the ", s->type_name(), "'s initial step: its last_epoch is ",
                           s->last_epoch_, ", the smallest int64"));
    }
    --s->last_epoch_;
    ++undone;
  }
  last_epoch_ = 0;
  const std::vector<double> lrs = group_lrs();
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) optimizer.set_lr(*optimizer.initial_lr(g), g);
  try {
    schedulers_[0]->initial_step();
  } catch (...) {
    redo();
    for (size_t g = 0; g < optimizer.num_param_groups(); ++g) optimizer.set_lr(lrs[g], g);
    throw;
  }
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::collect_leaves(LRScheduler& scheduler, std::vector<LRScheduler*>& out) {
  if (auto* sequential = dynamic_cast<SequentialLR*>(&scheduler)) {
    for (const auto& s : sequential->schedulers_) collect_leaves(*s, out);
  } else {
    out.push_back(&scheduler);
  }
}

void SequentialLR::step() {
  const int64_t epoch = advanced(last_epoch_, "last_epoch");
  // Python's bisect_right, which a loaded state's milestones need not be sorted for.
  size_t lo = 0, hi = milestones_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (epoch < milestones_[mid]) hi = mid;
    else lo = mid + 1;
  }
  const size_t idx = lo;
  LRScheduler& scheduler = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == epoch) {
    const int64_t restart = 0;
    scheduler.update_lr(&restart);
  } else {
    scheduler.step();
  }
  last_epoch_ = epoch;
  last_lr_ = scheduler.get_last_lr();
}

void SequentialLR::save_state(nn::StateDict& out) const {
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    for (const auto& [key, value] : schedulers_[i]->state_dict()) out.insert(cat("_schedulers.", i, ".", key), value);
  }
  out.insert("_milestones", ember::detail::optim::ints_tensor(milestones_));
}

void SequentialLR::load_state(SchedulerStateReader& in, bool apply) {
  std::vector<nn::StateDict> children;
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const std::string prefix = cat("_schedulers.", i, ".");
    children.push_back(in.entries_under(prefix));
    if (!apply) in.add_problems(cat("in ", prefix, ": "), schedulers_[i]->state_problems(children.back()));
  }
  const std::vector<int64_t> milestones = in.integers("_milestones");
  in.check(
      !in.has("_milestones") || milestones.size() == schedulers_.size() - 1,
      cat("invalid value for _milestones: expected ", schedulers_.size() - 1, " milestones, got ", milestones.size()));
  if (!apply) return;
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
  milestones_ = milestones;
}

}  // namespace ember::optim
