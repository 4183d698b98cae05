#include "exogym/runtime/sim/live_counts.h"

#include <map>
#include <set>

namespace exogym::runtime::sim {

std::vector<int> live_counts(const FaultSchedule& schedule, int64_t max_steps,
                             const std::optional<ParticipationSpec>& participation, int64_t round_steps,
                             uint64_t seed) {
  const int nodes = schedule.nodes();
  // A population draws its clients from all of them, whoever is alive (it
  // has no faults, manifest/participation_section.h).
  if (participation && participation->clients && *participation->clients > nodes)
    return {participants(*participation, *participation->clients)};
  // The nodes alive: every node before step 0, then each change of the
  // schedule in turn.
  std::set<int> alive_counts;
  if (!schedule.changes_at(0)) alive_counts.insert(nodes);
  int alive = nodes;
  for (const auto& [step, change] : schedule.changes()) {
    if (step >= max_steps) break;
    alive += static_cast<int>(change.returns.size()) - static_cast<int>(change.fails.size());
    alive_counts.insert(alive);
  }
  if (!participation) return {alive_counts.begin(), alive_counts.end()};
  // A round draws from the nodes alive at its start.
  std::set<int> counts;
  for (int a : alive_counts) counts.insert(participants(*participation, a));
  // A failure inside a round leaves its drawn nodes fewer (or, all of them
  // down, draws the rest of the round again): replayed, round by round.
  std::map<int64_t, std::vector<int64_t>> inside;  // by round's first step: the change steps inside it
  for (const auto& [step, change] : schedule.changes()) {
    if (step >= max_steps) break;
    if (step % round_steps != 0) inside[step - step % round_steps].push_back(step);
  }
  Participation draws(*participation, round_steps, seed);
  for (const auto& [start, steps] : inside) {
    draws.take_part(start, schedule.live_at(start));
    for (int64_t step : steps) counts.insert(static_cast<int>(draws.take_part(step, schedule.live_at(step)).size()));
  }
  return {counts.begin(), counts.end()};
}

}  // namespace exogym::runtime::sim
