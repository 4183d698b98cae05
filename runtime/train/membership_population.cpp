// A population of clients larger than the nodes (membership.h,
// docs/simulation.md#populations-of-clients): the nodes are slots that take
// on the identity of the clients each round draws.
#include <algorithm>
#include <string>
#include <vector>

#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

std::vector<int> Membership::next_population(int64_t step, const std::vector<int>& live_base,
                                             const std::vector<double>& clocks) {
  returns_.clear();
  donor_ = -1;
  // Inside a round (a resumed run's first step): the round's nodes and clients.
  if (!participation_->starts_round(step)) return live_base;
  trace_time_ = round_start(live_base, clocks);
  const int64_t round = step / participation_->round_steps();
  std::vector<int> drawn;
  if (trace_) {
    std::vector<int> available;
    for (int client = 0; client < trace_->clients(); ++client) {
      if (trace_->at(client, trace_time_).available) available.push_back(client);
    }
    if (available.empty()) {
      throw sdk::Error("participation.trace: no client is available at step " + std::to_string(step) + " (round " +
                       std::to_string(round) + ", simulated time " + util::format_duration(trace_time_) +
                       "): a round needs at least one");
    }
    drawn = participation_->take_clients(round, &available);
  } else {
    drawn = participation_->take_clients(round, nullptr);
  }
  EXOGYM_CHECK_INTERNAL(drawn.size() <= static_cast<size_t>(nodes_), "more clients drawn than nodes");
  std::vector<int> next;
  for (size_t i = 0; i < drawn.size(); ++i) {
    const int node = static_cast<int>(i);
    next.push_back(node);
    const bool stays = std::binary_search(live_base.begin(), live_base.end(), node) && slots_->client(node) == drawn[i];
    if (!stays) returns_.push_back(node);
    slots_->assign(node, drawn[i]);
  }
  if (returns_.empty()) return next;
  // The donor: a node that keeps its client, else the first of the round
  // before (it holds the state that round ended with, and may take on a
  // client itself: it loads its own copy).
  for (int node : next) {
    if (std::binary_search(live_base.begin(), live_base.end(), node) &&
        !std::binary_search(returns_.begin(), returns_.end(), node)) {
      donor_ = node;
      break;
    }
  }
  if (donor_ < 0) donor_ = live_base.front();
  return next;
}

}  // namespace exogym::runtime::train
