#include "exogym/runtime/sim/clock_exchange.h"

#include <algorithm>

namespace exogym::runtime::sim {

ClockExchange::ClockExchange(int nodes) : group_arrival_(nodes, 0.0), group_latest_(nodes, 0.0), posted_(nodes, 0) {
  slots_[0].assign(nodes, 0.0);
  slots_[1].assign(nodes, 0.0);
}

void ClockExchange::post(int rank, uint64_t sequence, double arrival) {
  slots_[sequence % 2][rank] = arrival;
  posted_[rank] = sequence + 1;
}

double ClockExchange::latest(uint64_t sequence) const {
  const auto& slot = slots_[sequence % 2];
  double latest = *std::max_element(slot.begin(), slot.end());
  // Nodes of other processes never post here; their latest comes shared.
  if (shared_sequence_[sequence % 2] == sequence) latest = std::max(latest, shared_[sequence % 2]);
  return latest;
}

std::optional<ClockExchange::Local> ClockExchange::take_local(const std::vector<int>& ranks) {
  if (ranks.empty() || posted_[ranks.front()] != taken_ + 1) return std::nullopt;
  const auto& slot = slots_[taken_ % 2];
  Local local{taken_, slot[ranks.front()]};
  for (int r : ranks) local.latest = std::max(local.latest, slot[r]);
  ++taken_;
  return local;
}

void ClockExchange::share_latest(uint64_t sequence, double latest) {
  shared_[sequence % 2] = latest;
  shared_sequence_[sequence % 2] = sequence;
}

void ClockExchange::rejoin(int rank, uint64_t sequence) {
  posted_[rank] = sequence;
  taken_ = sequence;
}

void ClockExchange::restore(uint64_t sequence) {
  std::fill(posted_.begin(), posted_.end(), sequence);
  taken_ = sequence;
}

}  // namespace exogym::runtime::sim
