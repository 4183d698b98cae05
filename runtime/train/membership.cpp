#include "exogym/runtime/train/membership.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/sim/live_counts.h"
#include "exogym/runtime/sim/payload.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/meters.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

std::vector<int> all_ranks(int nodes) {
  std::vector<int> ranks(static_cast<size_t>(nodes));
  for (int r = 0; r < nodes; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

}  // namespace

Membership::Membership(const manifest::Manifest& m, int64_t first_step, int64_t round_steps, dist::ProcessMesh* mesh,
                       std::shared_ptr<data::ClientSlots> slots)
    : simulated_(m.varies_membership()),
      nodes_(m.nodes),
      mesh_(mesh),
      schedule_(m.has_faults() ? sim::FaultSchedule(m.failure_spec()) : sim::FaultSchedule(m.nodes, m.max_steps)),
      first_step_(first_step),
      failure_timeout_(m.network.failure_timeout),
      counted_to_(first_step) {
  if (m.churn && m.churn->timed) timed_.emplace(m.failure_spec());
  if (m.participation) {
    participation_.emplace(*m.participation, round_steps, m.seed);
    trace_ = m.participation->trace;
    slots_ = std::move(slots);
    EXOGYM_CHECK_INTERNAL(m.has_population() == (slots_ != nullptr), "a population without its client slots");
  }
  set_live(all_ranks(m.nodes));
  alive_ = live_;
  live_counts_ = sim::live_counts(schedule_, m.max_steps, m.participation, round_steps, m.seed);
  owed_.assign(static_cast<size_t>(nodes_), kNone);
}

void Membership::set_live(std::vector<int> live) {
  live_flags_.assign(static_cast<size_t>(nodes_), 0);
  for (int r : live) live_flags_[static_cast<size_t>(r)] = 1;
  live_ = std::move(live);
}

bool Membership::meets_before(int64_t step) const {
  if (!simulated_ || asynchronous_) return false;
  return schedule_.changes_at(step) || timed_ || (step == first_step_ && first_step_ > 0) ||
         (participation_ && participation_->starts_round(step));
}

// From the schedule's change at `step`, and with churn on the simulated
// clock from the cluster's time: the latest clock of the nodes live before
// (those that sit a round out keep the clock they left with).
std::vector<int> Membership::next_alive(int64_t step, const std::vector<int>& base, const std::vector<int>& live_base,
                                        const std::vector<double>& clocks) {
  if (timed_) {
    double time = 0;
    for (int node : live_base) time = std::max(time, clocks[static_cast<size_t>(node)]);
    std::vector<int> next;
    for (int node = 0; node < nodes_; ++node) {
      if (schedule_.live(node, step) && !timed_->down(node, time)) next.push_back(node);
    }
    if (next.empty()) {
      throw sdk::Error("churn: no node is alive at step " + std::to_string(step) + " (simulated time " +
                       util::format_duration(time) + "): the run needs at least one node at every step");
    }
    return next;
  }
  const sim::FaultSchedule::Change* change = schedule_.change_at(step);
  if (!change) return base;
  std::vector<int> kept, next;
  std::set_difference(base.begin(), base.end(), change->fails.begin(), change->fails.end(), std::back_inserter(kept));
  std::set_union(kept.begin(), kept.end(), change->returns.begin(), change->returns.end(), std::back_inserter(next));
  return next;
}

void Membership::advance(int64_t step, Meters& simulation, train::Cluster& cluster, output::RunWriter* writer) {
  counted_ = node_steps(step);
  counted_to_ = step;
  // A resumed run's first meeting starts from the membership its checkpoint
  // saved (every node took part in the set-up since).
  const bool resumed = step == first_step_ && restored_live_;
  const std::vector<int> base = resumed ? *restored_live_ : live_;
  const std::vector<int> alive_base = resumed ? restored_alive_.value_or(base) : alive_;
  restored_live_.reset();
  restored_alive_.reset();
  if (slots_ && simulation.async().running()) {
    // An asynchronous strategy over a population: no rounds, no meetings
    // after this one; every node trains a client at all times, and the
    // schedule hands out the next as the server replies (async_schedule.h).
    asynchronous_ = true;
    cluster.set_members(all_ranks(nodes_));
    set_live(all_ranks(nodes_));
    simulation.start_async_population(*slots_, resumed);
    return;
  }
  const std::vector<double> clocks = node_clocks(simulation);
  const std::vector<int> before = clients_before(base);
  if (slots_) {
    std::vector<int> next = next_population(step, base, clocks);
    if (next != live_ || !returns_.empty()) ++epoch_;
    cluster.set_members(next);
    set_live(std::move(next));
    simulation.apply_clients(&slots_->clients(), trace_.get(), trace_time_, live_);
    settle_clients(before, {});
    return;
  }
  std::vector<int> alive = next_alive(step, alive_base, base, clocks);
  EXOGYM_CHECK_INTERNAL(!alive.empty(), "no node alive at step " + std::to_string(step));
  std::vector<int> next = participation_ ? participation_->take_part(step, drawable(step, alive, base, clocks)) : alive;

  std::vector<int> kept;
  std::set_intersection(base.begin(), base.end(), next.begin(), next.end(), std::back_inserter(kept));
  note_failures(step, alive_base, alive, base, kept, clocks, simulation, writer);
  returns_.clear();
  std::set_difference(next.begin(), next.end(), base.begin(), base.end(), std::back_inserter(returns_));
  donor_ = returns_.empty() ? -1 : choose_donor(step, kept, base, alive);
  if (next != live_) ++epoch_;
  cluster.set_members(next);
  set_live(std::move(next));
  std::vector<int> failed;
  std::set_difference(alive_base.begin(), alive_base.end(), alive.begin(), alive.end(), std::back_inserter(failed));
  alive_ = std::move(alive);
  settle_clients(before, failed);
  if (trace_) simulation.apply_clients(nullptr, trace_.get(), trace_time_, live_);
}

double Membership::round_start(const std::vector<int>& live_base, const std::vector<double>& clocks) {
  double time = 0;
  for (int node : live_base) time = std::max(time, clocks[static_cast<size_t>(node)]);
  return time;
}

// Without a trace, every alive node. With one, those the trace has
// available at the round's start: the latest clock of the nodes live before,
// as churn on the clock reads it (a resumed run keeps its round's time).
std::vector<int> Membership::drawable(int64_t step, const std::vector<int>& alive, const std::vector<int>& live_base,
                                      const std::vector<double>& clocks) {
  if (!trace_) return alive;
  if (participation_->starts_round(step)) trace_time_ = round_start(live_base, clocks);
  std::vector<int> available = trace_->available(alive, trace_time_);
  if (available.empty()) {
    throw sdk::Error("participation.trace: no client is available at step " + std::to_string(step) + " (round " +
                     std::to_string(step / participation_->round_steps()) + ", simulated time " +
                     util::format_duration(trace_time_) + ") among the " + std::to_string(alive.size()) +
                     " alive: a round needs at least one");
  }
  return available;
}

void Membership::note_failures(int64_t step, const std::vector<int>& alive_base, const std::vector<int>& alive,
                               const std::vector<int>& live_base, const std::vector<int>& kept,
                               const std::vector<double>& clocks, Meters& simulation, output::RunWriter* writer) {
  std::vector<int> failed;
  std::set_difference(alive_base.begin(), alive_base.end(), alive.begin(), alive.end(), std::back_inserter(failed));
  bool noticed = false;
  for (int node : failed) {
    // A late joiner is absent from step 0 on: it has not failed.
    if (step == 0 && schedule_.late_joiner(node)) {
      owed_[static_cast<size_t>(node)] = kJoin;
      continue;
    }
    owed_[static_cast<size_t>(node)] = kRejoin;
    // A node that sits the round out is in no collective to be missed at.
    noticed = noticed || std::binary_search(live_base.begin(), live_base.end(), node);
    ++failures_;
    if (!writer) continue;
    std::string detail;
    if (schedule_.live(node, step)) {
      detail = "down for " + util::format_duration(timed_->downtime());  // churn on the clock
    } else {
      const std::optional<int64_t> back = schedule_.back_at(node, step);
      detail = back ? "down until step " + std::to_string(*back) : "down for good";
    }
    writer->event_row(step, clocks[static_cast<size_t>(node)], node, "fail", detail);
  }
  // The survivors notice at their next collective.
  if (noticed) {
    for (int node : kept) {
      if (simulation.hosts(node)) simulation.meter(node).expect_failure_timeout(failure_timeout_);
    }
  }
}

// The lowest rank live before and after the step; with participation, when
// every node of the last round sits this one out, the lowest of them still
// alive: it holds the state the round ended with.
int Membership::choose_donor(int64_t step, const std::vector<int>& kept, const std::vector<int>& live_base,
                             const std::vector<int>& alive) const {
  if (!kept.empty()) return kept.front();
  if (participation_) {
    for (int node : live_base) {
      if (std::binary_search(alive.begin(), alive.end(), node)) return node;
    }
  }
  throw sdk::Error("churn: at step " + std::to_string(step) +
                   " nodes come back while every node alive before fails: nobody is left to give them the "
                   "run's state");
}

void Membership::keep_client_states() {
  EXOGYM_CHECK_INTERNAL(participation_.has_value(), "client states kept without participation");
  store_ = std::make_unique<ClientStore>();
}

std::vector<int> Membership::clients_before(const std::vector<int>& live_base) const {
  std::vector<int> before(static_cast<size_t>(nodes_), -1);
  for (int node : live_base) before[static_cast<size_t>(node)] = client_of(node);
  return before;
}

// After the membership changed: a node live before whose client it no
// longer trains lets the client go with its state, unless it failed (its
// memory is lost, as is the state of a failed node's client kept since).
void Membership::settle_clients(const std::vector<int>& before, const std::vector<int>& failed) {
  if (!store_) return;
  std::vector<int> leaving, taken, lost;
  for (int node = 0; node < nodes_; ++node) {
    const int client = before[static_cast<size_t>(node)];
    if (client < 0 || (is_live(node) && client_of(node) == client)) continue;
    if (!std::binary_search(failed.begin(), failed.end(), node)) leaving.push_back(node);
  }
  for (int node : failed) lost.push_back(client_of(node));
  for (int node : returns_) taken.push_back(client_of(node));
  store_->settle(leaving, taken, lost, mesh_);
}

bool Membership::returns(int rank) const { return std::binary_search(returns_.begin(), returns_.end(), rank); }

void Membership::deposit(sdk::StateDict state) {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  deposit_ = std::make_shared<sdk::StateDict>(std::move(state));
}

void Membership::deliver(int64_t step, Meters& simulation, output::RunWriter* writer) {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  EXOGYM_CHECK_INTERNAL(donor_ >= 0, "no donor at step " + std::to_string(step));
  const sim::DonorView from = share_deposit(simulation);
  EXOGYM_CHECK_INTERNAL(deposit_ != nullptr, "no recovery state deposited for step " + std::to_string(step));
  std::vector<at::Tensor> tensors;
  for (const auto& [key, tensor] : *deposit_) tensors.push_back(tensor);
  const double bytes = sim::payload_bytes(tensors);
  const int receivers = static_cast<int>(returns_.size());
  // One broadcast from the donor down a chain through the nodes coming back
  // (network_model.h); the survivors do not wait for it.
  const double seconds = simulation.network().broadcast_time(bytes, receivers + 1);
  int local_receivers = 0, recovered = 0;
  for (int node : returns_) {
    if (simulation.hosts(node)) {
      ++local_receivers;
      simulation.meter(node).rejoin(from, seconds);
      simulation.clocks().rejoin(node, from.sequence);
    }
    // With participation, a node drawn again after sitting out (not after a
    // failure) is counted apart, and events.csv lists failures only.
    const char owed = std::exchange(owed_[static_cast<size_t>(node)], kNone);
    if (participation_ && owed == kNone) {
      ++returns_drawn_;
      continue;
    }
    ++recovered;
    const bool late = participation_ ? owed == kJoin : schedule_.joins_late(node, step);
    ++(late ? joins_ : rejoins_);
    if (writer) {
      writer->event_row(step, from.clock + seconds, node, late ? "join" : "rejoin",
                        "state from node " + std::to_string(donor_) + ": " + util::format_bytes(bytes) + " in " +
                            util::format_duration(seconds));
    }
  }
  // One broadcast reaches both kinds: each total counts its time once.
  recovery_bytes_ += bytes * recovered;
  if (recovered > 0) recovery_seconds_ += seconds;
  transfer_bytes_ += bytes * (receivers - recovered);
  if (recovered < receivers) transfer_seconds_ += seconds;
  // Over several processes, those whose nodes do not come back keep none.
  delivered_ = local_receivers > 0 ? std::move(deposit_) : nullptr;
  deposit_.reset();
  pending_loads_ = local_receivers;
}

std::shared_ptr<const sdk::StateDict> Membership::delivered() const {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  return delivered_;
}

void Membership::loaded() {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  if (--pending_loads_ <= 0) delivered_.reset();
}

Membership::NodeSteps Membership::node_steps(int64_t steps) const {
  // The membership holds from the last meeting on.
  const int64_t since = steps - counted_to_;
  const auto live = static_cast<int64_t>(live_.size()), alive = static_cast<int64_t>(alive_.size());
  return {counted_.taken + live * since, counted_.lost + (nodes_ - alive) * since,
          counted_.sat_out + (alive - live) * since};
}

int64_t Membership::examples_trained(int64_t steps, int64_t batch_size) const {
  return node_steps(steps).taken * batch_size;
}

FaultTotals Membership::totals(int64_t steps) const {
  return {failures_, rejoins_, joins_, node_steps(steps).lost, recovery_bytes_, recovery_seconds_};
}

ParticipationTotals Membership::participation_totals(int64_t steps) const {
  return {participation_ && !asynchronous_ ? participation_->round_steps() : 0,
          node_steps(steps).sat_out,
          returns_drawn_,
          transfer_bytes_,
          transfer_seconds_,
          store_ ? store_->clients() : 0,
          store_ ? store_->bytes() : 0.0};
}

nlohmann::json Membership::checkpoint_state(int64_t steps) const {
  const NodeSteps counts = node_steps(steps);
  nlohmann::json state = {{"live", live_},
                          {"epoch", epoch_},
                          {"failures", failures_},
                          {"rejoins", rejoins_},
                          {"late_joins", joins_},
                          {"node_steps", counts.taken},
                          {"node_steps_lost", counts.lost},
                          {"recovery_bytes", recovery_bytes_},
                          {"recovery_time_s", recovery_seconds_}};
  if (participation_) {
    state["participation"] = {{"alive", alive_},
                              {"owed", std::vector<int>(owed_.begin(), owed_.end())},
                              {"round", participation_->state()},
                              {"node_steps_sat_out", counts.sat_out},
                              {"returns", returns_drawn_},
                              {"transfer_bytes", transfer_bytes_},
                              {"transfer_time_s", transfer_seconds_}};
    if (trace_) state["participation"]["trace_time_s"] = trace_time_;
    if (slots_) state["participation"]["clients"] = slots_->clients();
  }
  return state;
}

void Membership::restore(const nlohmann::json& state) {
  restored_live_ = state.at("live").get<std::vector<int>>();
  epoch_ = state.at("epoch");
  failures_ = state.at("failures");
  rejoins_ = state.at("rejoins");
  joins_ = state.at("late_joins");
  counted_.taken = state.at("node_steps");
  counted_.lost = state.at("node_steps_lost");
  recovery_bytes_ = state.at("recovery_bytes");
  recovery_seconds_ = state.at("recovery_time_s");
  if (!participation_) return;
  const nlohmann::json& p = state.at("participation");
  restored_alive_ = p.at("alive").get<std::vector<int>>();
  for (size_t r = 0; r < owed_.size(); ++r) owed_[r] = static_cast<char>(p.at("owed").at(r).get<int>());
  participation_->restore(p.at("round"));
  counted_.sat_out = p.at("node_steps_sat_out");
  returns_drawn_ = p.at("returns");
  transfer_bytes_ = p.at("transfer_bytes");
  transfer_seconds_ = p.at("transfer_time_s");
  if (trace_) trace_time_ = p.at("trace_time_s");
  if (slots_) {
    for (int r = 0; r < nodes_; ++r) slots_->assign(r, p.at("clients").at(static_cast<size_t>(r)).get<int>());
  }
}

}  // namespace exogym::runtime::train
