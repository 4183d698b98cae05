#include "exogym/runtime/train/membership.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "exogym/runtime/comm/inprocess_group.h"
#include "exogym/runtime/manifest/units.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/sim/payload.h"
#include "exogym/runtime/train/simulation.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

std::vector<int> all_ranks(int nodes) {
  std::vector<int> ranks(static_cast<size_t>(nodes));
  for (int r = 0; r < nodes; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

}  // namespace

Membership::Membership(const manifest::Manifest& m, int64_t first_step)
    : simulated_(m.has_faults()),
      nodes_(m.nodes),
      schedule_(m.has_faults() ? sim::FaultSchedule(m) : sim::FaultSchedule(m.nodes, m.max_steps)),
      first_step_(first_step),
      failure_timeout_(m.network.failure_timeout) {
  if (m.churn && m.churn->timed) timed_.emplace(m);
  set_live(all_ranks(m.nodes));
}

void Membership::set_live(std::vector<int> live) {
  live_flags_.assign(static_cast<size_t>(nodes_), 0);
  for (int r : live) live_flags_[static_cast<size_t>(r)] = 1;
  live_ = std::move(live);
}

bool Membership::meets_before(int64_t step) const {
  if (!simulated_) return false;
  return schedule_.changes_at(step) || timed_ || (step == first_step_ && first_step_ > 0);
}

// From the schedule's change at `step`, and with churn on the simulated
// clock from the cluster's time: the latest clock of the nodes alive before.
std::vector<int> Membership::next_live(int64_t step, const std::vector<int>& base, Simulation& simulation) {
  if (timed_) {
    double time = 0;
    for (int node : base) time = std::max(time, simulation.meter(node).clock());
    std::vector<int> next;
    for (int node = 0; node < nodes_; ++node) {
      if (schedule_.live(node, step) && !timed_->down(node, time)) next.push_back(node);
    }
    if (next.empty()) {
      throw sdk::Error("churn: no node is alive at step " + std::to_string(step) + " (simulated time " +
                       manifest::format_duration(time) + "): the run needs at least one node at every step");
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

void Membership::advance(int64_t step, Simulation& simulation, comm::InProcessGroup& group, output::RunWriter* writer) {
  // A resumed run's first meeting starts from the membership its checkpoint
  // saved (every node took part in the set-up since).
  const std::vector<int> base = step == first_step_ && restored_live_ ? *restored_live_ : live_;
  restored_live_.reset();
  std::vector<int> next = next_live(step, base, simulation);
  EXOGYM_CHECK_INTERNAL(!next.empty(), "no node alive at step " + std::to_string(step));

  std::vector<int> failed, kept;
  std::set_difference(base.begin(), base.end(), next.begin(), next.end(), std::back_inserter(failed));
  std::set_intersection(base.begin(), base.end(), next.begin(), next.end(), std::back_inserter(kept));
  returns_.clear();
  std::set_difference(next.begin(), next.end(), base.begin(), base.end(), std::back_inserter(returns_));
  bool noticed = false;
  for (int node : failed) {
    // A late joiner is absent from step 0 on: it has not failed.
    if (step == 0 && schedule_.late_joiner(node)) continue;
    noticed = true;
    ++failures_;
    if (!writer) continue;
    std::string detail;
    if (schedule_.live(node, step)) {
      detail = "down for " + manifest::format_duration(timed_->downtime());  // churn on the clock
    } else {
      const std::optional<int64_t> back = schedule_.back_at(node, step);
      detail = back ? "down until step " + std::to_string(*back) : "down for good";
    }
    writer->event_row(step, simulation.meter(node).clock(), node, "fail", detail);
  }
  // The survivors notice at their next collective.
  if (noticed) {
    for (int node : kept) simulation.meter(node).expect_failure_timeout(failure_timeout_);
  }
  donor_ = -1;
  if (!returns_.empty()) {
    if (kept.empty()) {
      throw sdk::Error("churn: at step " + std::to_string(step) +
                       " nodes come back while every node alive before fails: nobody is left to give them the "
                       "run's state");
    }
    donor_ = kept.front();
  }
  if (next != live_) ++epoch_;
  group.set_members(next);
  set_live(std::move(next));
}

bool Membership::returns(int rank) const { return std::binary_search(returns_.begin(), returns_.end(), rank); }

void Membership::deposit(sdk::StateDict state) {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  deposit_ = std::make_shared<sdk::StateDict>(std::move(state));
}

void Membership::deliver(int64_t step, Simulation& simulation, output::RunWriter* writer) {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  EXOGYM_CHECK_INTERNAL(donor_ >= 0 && deposit_, "no recovery state deposited for step " + std::to_string(step));
  std::vector<at::Tensor> tensors;
  for (const auto& [key, tensor] : *deposit_) tensors.push_back(tensor);
  const double bytes = sim::payload_bytes(tensors);
  const int receivers = static_cast<int>(returns_.size());
  // One broadcast from the donor down a chain through the nodes coming back
  // (network_model.h); the survivors do not wait for it.
  const double seconds = simulation.network().broadcast_time(bytes, receivers + 1);
  recovery_bytes_ += bytes * receivers;
  recovery_seconds_ += seconds;
  const sim::NodeMeter& from = simulation.meter(donor_);
  for (int node : returns_) {
    const bool late = schedule_.joins_late(node, step);
    ++(late ? joins_ : rejoins_);
    simulation.meter(node).rejoin(from, seconds);
    if (writer) {
      writer->event_row(step, from.clock() + seconds, node, late ? "join" : "rejoin",
                        "state from node " + std::to_string(donor_) + ": " + manifest::format_bytes(bytes) + " in " +
                            manifest::format_duration(seconds));
    }
  }
  delivered_ = std::move(deposit_);
  pending_loads_ = receivers;
}

std::shared_ptr<const sdk::StateDict> Membership::delivered() const {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  return delivered_;
}

void Membership::loaded() {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  if (--pending_loads_ <= 0) delivered_.reset();
}

int64_t Membership::count_step(int64_t batch_size) {
  node_steps_ += static_cast<int64_t>(live_.size());
  node_steps_lost_ += nodes_ - static_cast<int64_t>(live_.size());
  return node_steps_ * batch_size;
}

FaultTotals Membership::totals() const {
  return {failures_, rejoins_, joins_, node_steps_lost_, recovery_bytes_, recovery_seconds_};
}

nlohmann::json Membership::checkpoint_state() const {
  return {{"live", live_},
          {"epoch", epoch_},
          {"failures", failures_},
          {"rejoins", rejoins_},
          {"late_joins", joins_},
          {"node_steps", node_steps_},
          {"node_steps_lost", node_steps_lost_},
          {"recovery_bytes", recovery_bytes_},
          {"recovery_time_s", recovery_seconds_}};
}

void Membership::restore(const nlohmann::json& state) {
  restored_live_ = state.at("live").get<std::vector<int>>();
  epoch_ = state.at("epoch");
  failures_ = state.at("failures");
  rejoins_ = state.at("rejoins");
  joins_ = state.at("late_joins");
  node_steps_ = state.at("node_steps");
  node_steps_lost_ = state.at("node_steps_lost");
  recovery_bytes_ = state.at("recovery_bytes");
  recovery_seconds_ = state.at("recovery_time_s");
}

}  // namespace exogym::runtime::train
