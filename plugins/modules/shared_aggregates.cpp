#include "exogym/modules/shared_aggregates.h"

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
    // Entries nobody uses any more go: copies of an entry are only made
    // here, under the lock, so a count of 1 (the map's) stays 1.
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.use_count() == 1 && it->second->result.expired())
        it = entries_.erase(it);
      else
        ++it;
    }
    auto& slot = entries_[{step, members}];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  // Groups of other rounds or islands compute at the same time.
  std::lock_guard<std::mutex> lock(entry->mutex);
  Result result = entry->result.lock();
  if (!result) {
    result = std::make_shared<const std::vector<at::Tensor>>(compute());
    entry->result = result;
  }
  return result;
}

}  // namespace exogym::modules
