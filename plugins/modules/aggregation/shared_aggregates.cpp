#include "exogym/modules/aggregation/shared_aggregates.h"

#include "exogym/sdk/shared.h"

namespace exogym::modules {

std::shared_ptr<SharedAggregates> SharedAggregates::in_process(sdk::NodeContext& ctx) {
  return sdk::shared_in_process<SharedAggregates>(ctx, "fedavg.aggregates",
                                                  [] { return std::make_shared<SharedAggregates>(); });
}

SharedAggregates::Result SharedAggregates::get(int64_t step, const std::vector<int>& members,
                                               const std::function<std::vector<at::Tensor>()>& compute) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (step > newest_) {
      // A newer round: the older ones' aggregates go (their late members
      // recompute what they need).
      newest_ = step;
      for (auto it = entries_.begin(); it != entries_.end();) it = it->first.first < step ? entries_.erase(it) : ++it;
    }
    auto& slot = entries_[{step, members}];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  // Groups of other rounds or islands compute at the same time.
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (!entry->result) entry->result = std::make_shared<const std::vector<at::Tensor>>(compute());
  return entry->result;
}

}  // namespace exogym::modules
