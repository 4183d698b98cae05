#include "exogym/runtime/train/membership.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "exogym/runtime/comm/inprocess_group.h"
#include "exogym/runtime/manifest/units.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/train/simulation.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

std::vector<int> all_ranks(int nodes) {
  std::vector<int> ranks(static_cast<size_t>(nodes));
  for (int r = 0; r < nodes; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

double state_bytes(const sdk::StateDict& state) {
  double bytes = 0;
  for (const auto& [key, tensor] : state) bytes += static_cast<double>(tensor.numel() * tensor.element_size());
  return bytes;
}

}  // namespace

Membership::Membership(const manifest::Manifest& m, int64_t first_step)
    : simulated_(m.has_faults()),
      schedule_(m.has_faults() ? sim::FaultSchedule(m) : sim::FaultSchedule(m.nodes, m.max_steps)),
      first_step_(first_step),
      failure_timeout_(m.network.failure_timeout) {
  set_live(all_ranks(m.nodes));
  // The donors: the lowest rank alive both before and after each step where
  // nodes come back, found in one sweep over the changes.
  std::set<int> alive(live_.begin(), live_.end());
  for (const auto& [step, change] : schedule_.changes()) {
    for (int node : change.fails) alive.erase(node);
    if (!change.returns.empty()) donors_[step] = *alive.begin();  // the schedule checked there is one
    alive.insert(change.returns.begin(), change.returns.end());
  }
  if (first_step > 0) {
    resume_meeting_ = schedule_.live_at(first_step - 1).size() != live_.size();
    node_steps_ = first_step * m.nodes - schedule_.node_steps_lost(first_step);
    counted_to_ = first_step;
    for (int64_t step = 0; step < first_step; ++step) {
      for (const auto& event : schedule_.events_at(step)) {
        if (event.kind == sim::MembershipEvent::Kind::Fail) ++failures_;
        if (event.kind == sim::MembershipEvent::Kind::Rejoin) ++rejoins_;
        if (event.kind == sim::MembershipEvent::Kind::Join) ++joins_;
      }
    }
  }
}

void Membership::set_live(std::vector<int> live) {
  live_flags_.assign(live_flags_.empty() ? live.size() : live_flags_.size(), 0);
  for (int r : live) live_flags_[static_cast<size_t>(r)] = 1;
  live_ = std::move(live);
}

bool Membership::meets_before(int64_t step) const {
  return schedule_.changes_at(step) || (step == first_step_ && resume_meeting_);
}

int Membership::donor_at(int64_t step) const {
  auto it = donors_.find(step);
  return it == donors_.end() ? -1 : it->second;
}

bool Membership::returns_at(int rank, int64_t step) const {
  const sim::FaultSchedule::Change* change = schedule_.change_at(step);
  return change && std::binary_search(change->returns.begin(), change->returns.end(), rank);
}

void Membership::deposit(sdk::StateDict state) {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  deposit_ = std::make_shared<sdk::StateDict>(std::move(state));
}

void Membership::advance(int64_t step, Simulation& simulation, comm::InProcessGroup& group, output::RunWriter* writer) {
  // A resumed run's first meeting starts from the membership of the step
  // before (every node took part in the set-up since).
  std::vector<int> base = step == first_step_ && first_step_ > 0 ? schedule_.live_at(step - 1) : live_;
  const sim::FaultSchedule::Change* change = schedule_.change_at(step);
  std::vector<int> next = base;
  if (change) {
    std::vector<int> kept;
    std::set_difference(base.begin(), base.end(), change->fails.begin(), change->fails.end(), std::back_inserter(kept));
    next.clear();
    std::set_union(kept.begin(), kept.end(), change->returns.begin(), change->returns.end(), std::back_inserter(next));
  }
  EXOGYM_CHECK_INTERNAL(!next.empty(), "no node alive at step " + std::to_string(step));

  bool failed = false;
  for (const sim::MembershipEvent& event : schedule_.events_at(step)) {
    if (event.kind != sim::MembershipEvent::Kind::Fail) continue;
    failed = true;
    ++failures_;
    const std::optional<int64_t> back = schedule_.back_at(event.node, step);
    if (writer) {
      writer->event_row(step, simulation.meter(event.node).clock(), event.node, "fail",
                        back ? "down until step " + std::to_string(*back) : "down for good");
    }
  }
  // The survivors notice at their next collective.
  if (failed) {
    for (int node : next) {
      if (std::binary_search(base.begin(), base.end(), node)) {
        simulation.meter(node).expect_failure_timeout(failure_timeout_);
      }
    }
  }

  {
    std::lock_guard<std::mutex> lock(mailbox_mutex_);
    delivered_.reset();
    pending_loads_ = 0;
    if (change && !change->returns.empty()) {
      const int donor = donor_at(step);
      EXOGYM_CHECK_INTERNAL(donor >= 0 && deposit_, "no recovery state deposited for step " + std::to_string(step));
      const double bytes = state_bytes(*deposit_);
      const int receivers = static_cast<int>(change->returns.size());
      // One broadcast from the donor down a chain through the nodes coming
      // back (network_model.h); the survivors do not wait for it.
      const double seconds = simulation.network().broadcast_time(bytes, receivers + 1);
      recovery_bytes_ += bytes * receivers;
      recovery_seconds_ += seconds;
      const sim::NodeMeter& from = simulation.meter(donor);
      for (int node : change->returns) {
        const bool late = schedule_.joins_late(node, step);
        ++(late ? joins_ : rejoins_);
        simulation.meter(node).rejoin(from, seconds);
        if (writer) {
          writer->event_row(step, from.clock() + seconds, node, late ? "join" : "rejoin",
                            "state from node " + std::to_string(donor) + ": " + manifest::format_bytes(bytes) + " in " +
                                manifest::format_duration(seconds));
        }
      }
      delivered_ = std::move(deposit_);
      pending_loads_ = receivers;
    }
    deposit_.reset();
  }
  group.set_members(next);
  set_live(std::move(next));
  epoch_ = schedule_.epoch_at(step);
}

std::shared_ptr<const sdk::StateDict> Membership::delivered() const {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  return delivered_;
}

void Membership::loaded() {
  std::lock_guard<std::mutex> lock(mailbox_mutex_);
  if (--pending_loads_ <= 0) delivered_.reset();
}

int64_t Membership::count_step(int64_t step, int64_t batch_size) {
  if (step >= counted_to_) {
    node_steps_ += static_cast<int64_t>(live_.size());
    counted_to_ = step + 1;
  }
  return node_steps_ * batch_size;
}

FaultTotals Membership::totals(int64_t steps_done) const {
  return {failures_, rejoins_, joins_, schedule_.node_steps_lost(steps_done), recovery_bytes_, recovery_seconds_};
}

nlohmann::json Membership::checkpoint_state() const {
  return {{"recovery_bytes", recovery_bytes_}, {"recovery_time_s", recovery_seconds_}};
}

void Membership::restore(const nlohmann::json& state) {
  recovery_bytes_ = state.at("recovery_bytes");
  recovery_seconds_ = state.at("recovery_time_s");
}

}  // namespace exogym::runtime::train
