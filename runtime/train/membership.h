#pragma once
// Which nodes of a run are alive, step by step, when the run simulates
// failures (docs/simulation.md#failures-and-churn), and the recovery of the
// nodes that come back.
//
// Every node knows when the membership may change: the schedule
// (sim/fault_schedule.h) is fixed before training, and churn on the
// simulated clock (sim/timed_churn.h) may change it at any step. Before such
// a step every node of the run, alive or down, meets (Cluster::meet_all);
// the last to arrive moves the run to the new membership (advance()): the
// collectives' members, the events.csv rows of failures, the survivors'
// failure timeout. Between two meetings nothing is shared but the live list
// the node contexts point to, which only advance() writes while every node
// waits.
//
// Recovery, when nodes come back: the donor (the lowest rank alive before
// and after the step) puts a copy of its recovery state in the mailbox
// (deposit()); every node meets again, and the last to arrive delivers it
// (deliver(): the bytes, the returning nodes' clocks, their events.csv
// rows); each node that comes back loads it (delivered()) and says so
// (loaded()); the last one frees it.
//
// Partial participation (sim/participation.h) works the same way: each
// round, the nodes not drawn are down, and a node drawn again receives the
// state as one that comes back. With an availability trace, a round draws
// among the nodes available at its start on the simulated clock, and the
// trace's speeds and bandwidths hold for the round (Meters::apply_clients).
// With a population of clients larger than the nodes, the nodes are slots:
// each round's clients go to nodes 0, 1, ..., and a node that takes on
// another client receives the state as a node drawn again
// (membership_population.cpp); under an asynchronous strategy there are no
// rounds: the first meeting hands the population to the schedule, which
// gives each node its next client as the server replies to it
// (async/async_schedule.h), and no meeting follows. Two memberships are
// kept apart: the nodes alive (by failures alone, which events.csv and the
// "faults" totals tell) and the nodes live (alive and drawn, which train
// and communicate).
//
// Over several processes every process keeps its own Membership, and all
// of them take the same decisions: the meetings span every process
// (Cluster::meet_all), where advance() shares the nodes' clocks and
// deliver() carries the donor's state and meter to every process
// (membership_processes.cpp).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exogym/runtime/data/client_slots.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/sim/participation.h"
#include "exogym/runtime/sim/timed_churn.h"
#include "exogym/runtime/train/client_store.h"
#include "exogym/runtime/train/training_result.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::output {
class RunWriter;
}

namespace exogym::runtime::train {

class Cluster;

class Meters;

class Membership {
 public:
  // A run that starts (or resumes) at `first_step`. Until the first meeting
  // every node is alive: every node takes part in the set-up.
  // `round_steps`: a participation round's steps (TrainingPlugins). `mesh`:
  // the other processes of a run over several (null: one process).
  // `slots`: with a population (Manifest::has_population), the client each
  // node trains, which each round's draw assigns.
  Membership(const manifest::Manifest& m, int64_t first_step, int64_t round_steps = 0,
             dist::ProcessMesh* mesh = nullptr, std::shared_ptr<data::ClientSlots> slots = nullptr);

  // Whether the live nodes may change (the run has "faults", "churn" or
  // "participation"), even if no node happens to fail or sit out.
  bool simulated() const { return simulated_; }

  // The live nodes now, in rank order, and the number of changes so far.
  const std::vector<int>& live() const { return live_; }
  // Every number of live nodes a step can have, as known before training
  // (sim/live_counts.h): sdk::NodeContext::live_counts.
  const std::vector<int>& live_counts() const { return live_counts_; }
  int64_t epoch() const { return epoch_; }
  bool is_live(int rank) const { return live_flags_[rank] != 0; }
  // The node that writes train.csv and validation.csv and saves the model:
  // the lowest live rank ("local" is its model).
  int reporter() const { return live_.front(); }

  // Whether every node meets before step `step`: its membership may change
  // (the schedule says so, churn runs on the simulated clock, or a
  // participation round starts), or it is a resumed run's first step.
  bool meets_before(int64_t step) const;
  // The meeting's work, by the last node to arrive while every node waits:
  // moves to step's membership. sdk::Error when no node would be alive, or
  // nodes come back with nobody left to give them the state.
  void advance(int64_t step, Meters& simulation, train::Cluster& cluster, output::RunWriter* writer);

  // After advance(): whether nodes come back at this step, who gives them
  // the state, and whether `rank` is one of them.
  bool recovering() const { return !returns_.empty(); }
  int donor() const { return donor_; }
  bool returns(int rank) const;
  // The recovery: the donor leaves a copy of its state, every node meets
  // again (the last runs deliver()), and each node coming back takes it.
  void deposit(sdk::StateDict state);
  void deliver(int64_t step, Meters& simulation, output::RunWriter* writer);
  std::shared_ptr<const sdk::StateDict> delivered() const;
  void loaded();

  // With participation, for a strategy with state of its clients
  // (Strategy::has_client_state): from now on, each meeting settles the store
  // (client_store.h). Null until then.
  void keep_client_states();
  ClientStore* client_store() const { return store_.get(); }
  // The client node `rank` trains: its own rank unless a population.
  int client_of(int rank) const { return slots_ ? slots_->client(rank) : rank; }

  // The examples all live nodes trained in the first `steps` steps, for
  // train.csv (steps after the last meeting).
  int64_t examples_trained(int64_t steps, int64_t batch_size) const;

  // The run's totals after `steps` steps (after the last meeting), for
  // summary.json ("faults"); what a checkpoint after `steps` keeps.
  FaultTotals totals(int64_t steps) const;
  ParticipationTotals participation_totals(int64_t steps) const;
  nlohmann::json checkpoint_state(int64_t steps) const;
  void restore(const nlohmann::json& state);

 private:
  void set_live(std::vector<int> live);
  // The nodes alive at `step`, from those alive before (`base`); churn on
  // the clock reads the time of the nodes live before (`live_base`).
  std::vector<int> next_alive(int64_t step, const std::vector<int>& base, const std::vector<int>& live_base,
                              const std::vector<double>& clocks);
  // A population's membership at `step` (membership_population.cpp): at a
  // round's start, its clients go to nodes 0, 1, ... in client order, and a
  // node whose client changes receives the state as a node drawn again.
  std::vector<int> next_population(int64_t step, const std::vector<int>& live_base, const std::vector<double>& clocks);
  // The simulated time of a round that starts now: the latest clock of the
  // nodes live before.
  static double round_start(const std::vector<int>& live_base, const std::vector<double>& clocks);
  // The alive nodes a round may draw: with a trace, those available.
  std::vector<int> drawable(int64_t step, const std::vector<int>& alive, const std::vector<int>& live_base,
                            const std::vector<double>& clocks);
  // The nodes alive before and not at `step`: failures (events, timeouts).
  void note_failures(int64_t step, const std::vector<int>& alive_base, const std::vector<int>& alive,
                     const std::vector<int>& live_base, const std::vector<int>& kept, const std::vector<double>& clocks,
                     Meters& simulation, output::RunWriter* writer);
  int choose_donor(int64_t step, const std::vector<int>& kept, const std::vector<int>& live_base,
                   const std::vector<int>& alive) const;
  // Node-steps up to `steps`: taken, lost to failures, and sat out.
  struct NodeSteps {
    int64_t taken = 0, lost = 0, sat_out = 0;
  };
  NodeSteps node_steps(int64_t steps) const;
  // Over several processes (membership_processes.cpp): every node's clock,
  // by rank; the donor's state and meter to every process.
  std::vector<double> node_clocks(const Meters& simulation) const;
  sim::DonorView share_deposit(const Meters& simulation);

  const bool simulated_;
  const int nodes_;
  dist::ProcessMesh* const mesh_;
  const sim::FaultSchedule schedule_;
  std::optional<sim::TimedChurn> timed_;  // churn on the simulated clock
  const int64_t first_step_;
  const double failure_timeout_;
  std::optional<sim::Participation> participation_;
  // participation.trace, and the simulated time of the round's start at
  // which it is read (its availability, speeds and bandwidths).
  std::shared_ptr<const sim::AvailabilityTrace> trace_;
  double trace_time_ = 0;
  std::shared_ptr<data::ClientSlots> slots_;  // a population's; null otherwise
  // A population under an asynchronous strategy, from the first meeting on.
  bool asynchronous_ = false;
  std::unique_ptr<ClientStore> store_;
  // At a meeting: the clients of the nodes live before, by rank (-1: not
  // live), whose client leaves them unless they train it still.
  std::vector<int> clients_before(const std::vector<int>& live_base) const;
  void settle_clients(const std::vector<int>& before, const std::vector<int>& failed);
  // A resumed run's, before its first step: the live and the alive nodes.
  std::optional<std::vector<int>> restored_live_, restored_alive_;

  std::vector<int> live_;
  std::vector<int> live_counts_;
  std::vector<char> live_flags_;  // by rank
  std::vector<int> alive_;        // by failures alone; live_ without participation
  int64_t epoch_ = 0;
  // With participation, by rank: whether a node failed (kRejoin) or joins
  // late (kJoin) and has not received the state since, so that when it is
  // next live its transfer counts as recovery from a failure.
  enum Owed : char { kNone = 0, kRejoin = 1, kJoin = 2 };
  std::vector<char> owed_;

  // The recovery of the current step.
  int donor_ = -1;
  std::vector<int> returns_;
  mutable std::mutex mailbox_mutex_;
  std::shared_ptr<sdk::StateDict> deposit_;
  std::shared_ptr<const sdk::StateDict> delivered_;
  int pending_loads_ = 0;

  // Node-steps taken, lost and sat out before step counted_to_ (the last meeting).
  int64_t counted_to_ = 0;
  NodeSteps counted_;
  int64_t failures_ = 0, rejoins_ = 0, joins_ = 0;
  double recovery_bytes_ = 0, recovery_seconds_ = 0;
  // Nodes drawn again after sitting rounds out, and their state's transfers.
  int64_t returns_drawn_ = 0;
  double transfer_bytes_ = 0, transfer_seconds_ = 0;
};

}  // namespace exogym::runtime::train
