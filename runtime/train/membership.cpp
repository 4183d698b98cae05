#include "exogym/runtime/train/membership.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/sim/payload.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/meters.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

std::vector<int> all_ranks(int nodes) {
  std::vector<int> ranks(static_cast<size_t>(nodes));
  for (int r = 0; r < nodes; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

}  // namespace

Membership::Membership(const manifest::Manifest& m, int64_t first_step, dist::ProcessMesh* mesh)
    : simulated_(m.has_faults()),
      nodes_(m.nodes),
      mesh_(mesh),
      schedule_(m.has_faults() ? sim::FaultSchedule(m.failure_spec()) : sim::FaultSchedule(m.nodes, m.max_steps)),
      first_step_(first_step),
      failure_timeout_(m.network.failure_timeout),
      counted_to_(first_step) {
  if (m.churn && m.churn->timed) timed_.emplace(m.failure_spec());
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
std::vector<int> Membership::next_live(int64_t step, const std::vector<int>& base, const std::vector<double>& clocks) {
  if (timed_) {
    double time = 0;
    for (int node : base) time = std::max(time, clocks[static_cast<size_t>(node)]);
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
  const auto [taken, lost] = node_steps(step);
  node_steps_ = taken;
  node_steps_lost_ = lost;
  counted_to_ = step;
  // A resumed run's first meeting starts from the membership its checkpoint
  // saved (every node took part in the set-up since).
  const std::vector<int> base = step == first_step_ && restored_live_ ? *restored_live_ : live_;
  restored_live_.reset();
  const std::vector<double> clocks = node_clocks(simulation);
  std::vector<int> next = next_live(step, base, clocks);
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
  cluster.set_members(next);
  set_live(std::move(next));
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
  recovery_bytes_ += bytes * receivers;
  recovery_seconds_ += seconds;
  int local_receivers = 0;
  for (int node : returns_) {
    const bool late = schedule_.joins_late(node, step);
    ++(late ? joins_ : rejoins_);
    if (simulation.hosts(node)) {
      ++local_receivers;
      simulation.meter(node).rejoin(from, seconds);
      simulation.clocks().rejoin(node, from.sequence);
    }
    if (writer) {
      writer->event_row(step, from.clock + seconds, node, late ? "join" : "rejoin",
                        "state from node " + std::to_string(donor_) + ": " + util::format_bytes(bytes) + " in " +
                            util::format_duration(seconds));
    }
  }
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

std::pair<int64_t, int64_t> Membership::node_steps(int64_t steps) const {
  // The membership holds from the last meeting on.
  const int64_t since = steps - counted_to_;
  const int64_t live = static_cast<int64_t>(live_.size());
  return {node_steps_ + live * since, node_steps_lost_ + (nodes_ - live) * since};
}

int64_t Membership::examples_trained(int64_t steps, int64_t batch_size) const {
  return node_steps(steps).first * batch_size;
}

FaultTotals Membership::totals(int64_t steps) const {
  return {failures_, rejoins_, joins_, node_steps(steps).second, recovery_bytes_, recovery_seconds_};
}

nlohmann::json Membership::checkpoint_state(int64_t steps) const {
  const auto [taken, lost] = node_steps(steps);
  return {{"live", live_},
          {"epoch", epoch_},
          {"failures", failures_},
          {"rejoins", rejoins_},
          {"late_joins", joins_},
          {"node_steps", taken},
          {"node_steps_lost", lost},
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
