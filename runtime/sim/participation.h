#pragma once
// Partial participation (docs/simulation.md#partial-participation): each
// round of a strategy, only some of the live nodes take part, drawn from the
// run's seed. A node that sits a round out is down for that round, as a
// failed one (train/membership.h applies it): it computes nothing, sends
// nothing, and when it is drawn again it receives the current state.
//
// Rounds are `round` steps long and start at steps 0, round, 2·round, ...
// The draw of round k depends on the run's seed, k and the nodes alive at the
// round's first step only, so it is the same for any parallelism, process
// count or resume.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "exogym/runtime/sim/availability_trace.h"

namespace exogym::runtime::sim {

// The manifest's "participation": exactly one of per_round and fraction.
struct ParticipationSpec {
  std::optional<int> per_round;
  std::optional<double> fraction;  // in (0, 1]
  // Steps per round; nullopt: the strategy's (its H option, train/setup.h).
  std::optional<int64_t> round;
  // "clients": the population the rounds draw from, when larger than the
  // nodes (each node then trains one drawn client at a time); nullopt:
  // the nodes are the clients.
  std::optional<int> clients;
  // "trace": who can be drawn, and at what speed and bandwidth, over the
  // simulated clock (sim/availability_trace.h); null without one.
  std::shared_ptr<const AvailabilityTrace> trace;
};

// How many of `live` nodes a round takes: per_round (at most `live`, since
// failures may leave fewer), or ceil(fraction × live), at least 1. A product
// within 1e-9 of a whole number counts as that number, so that 0.1 × 30 is
// 3, not the 4 that its binary rounding (3.0000000000000004) would give.
int participants(const ParticipationSpec& spec, int live);

// `count` of the ranks `live` (sorted) drawn uniformly without replacement
// (a partial Fisher-Yates shuffle over mt19937_64, whose output the standard
// fixes, with unbiased bounded draws: no std distribution, whose algorithm is
// the library's choice), in rank order, from the generator seeded with
// `generator_seed`.
std::vector<int> draw_participants(uint64_t generator_seed, const std::vector<int>& live, int count);

// `count` of the clients 0 to population - 1, drawn as draw_participants
// draws from all of them, without a vector of the population: a partial
// Fisher-Yates shuffle whose swapped places alone are kept (O(count)), in
// client order.
std::vector<int> draw_clients(uint64_t generator_seed, int population, int count);

// Which nodes take part in the current round, as the run goes. Used by the
// last node to arrive at a membership meeting (train/membership.h), while
// every node waits.
class Participation {
 public:
  Participation(ParticipationSpec spec, int64_t round_steps, uint64_t seed);

  int64_t round_steps() const { return round_steps_; }
  // Whether `step` starts a round.
  bool starts_round(int64_t step) const { return step % round_steps_ == 0; }

  // The nodes that take part in `step`, among `alive` (sorted, not empty):
  // a new draw at a round's first step; later, the round's draw, less the
  // nodes that are not alive. Should every drawn node be down at a later
  // step of the round, the rest of the round is drawn again among `alive`
  // (a stream keyed by that step), since a step needs a node.
  std::vector<int> take_part(int64_t step, const std::vector<int>& alive);
  // With a population (spec.clients): round `round`'s clients, drawn among
  // `available` (sorted), or among all clients when null. Kept as the
  // round's draw.
  std::vector<int> take_clients(int64_t round, const std::vector<int>* available);

  // The round's draw, for a checkpoint, and back on resume.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  ParticipationSpec spec_;
  int64_t round_steps_;
  uint64_t seed_;
  std::vector<int> drawn_;  // the current round's
};

}  // namespace exogym::runtime::sim
