// NodeRun's part in a membership change (node_run.h, membership.h): the
// meeting, the recovery of the nodes that come back, and the state their
// clients keep between rounds (client_store.h).
#include <string>
#include <utility>

#include "exogym/runtime/train/node_run.h"
#include "exogym/runtime/train/reports.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::train {

void NodeRun::change_membership(int64_t t) {
  ctx_.step = t;
  offer_client_state(t);
  phase_ = "changing the membership before step " + std::to_string(t);
  cluster_.meet_all(rank_, &slot_, [this, t] {
    // The reporting node may change: what it reported from another process
    // first.
    if (s_.run.role.mesh) exchange_reports(s_.run, s_.outputs, s_.reported);
    membership_.advance(t, *s_.simulation, cluster_, s_.outputs.writer.get());
  });
  ctx_.membership_epoch = membership_.epoch();
  ctx_.client = membership_.client_of(rank_);
  // With a population, each node says which client it trains in the round
  // (asynchronous: its first; async_slot says when it takes on another).
  if (s_.setup.data.client_slots && membership_.is_live(rank_) &&
      (asynchronous_ ? t == 0 : t % s_.setup.plugins.round_steps == 0))
    ctx_.record("client", ctx_.client);
  if (membership_.recovering()) recover(t);
}

// At a round's start, a node that trained a client leaves its state to the
// store, in case the client leaves it (the meeting decides). Not at step 0:
// no client has trained yet.
void NodeRun::offer_client_state(int64_t t) {
  if (!client_state_ || t == 0 || t % s_.setup.plugins.round_steps != 0 || !membership_.is_live(rank_)) return;
  phase_ = "saving the state of client " + std::to_string(ctx_.client) + " of " + strategy_name_;
  sdk::StateDict state;
  client_state_->save_client_state(state);
  membership_.client_store()->offer(rank_, ctx_.client, state);
}

void NodeRun::recover(int64_t t) {
  if (membership_.donor() == rank_) {
    phase_ = "sending the state of " + strategy_name_ + " to the nodes that come back";
    sdk::StateDict state;
    strategy_.recovery_state(model_, state);
    // A copy: this node trains on while the others take it.
    for (auto& [key, tensor] : state) tensor = tensor.detach().clone();
    membership_.deposit(std::move(state));
  }
  phase_ = "recovering the nodes that come back at step " + std::to_string(t);
  cluster_.meet_all(rank_, &slot_, [this, t] { membership_.deliver(t, *s_.simulation, s_.outputs.writer.get()); });
  if (!membership_.returns(rank_)) return;
  phase_ = "taking the state of " + strategy_name_ + " from node " + std::to_string(membership_.donor());
  const auto state = membership_.delivered();
  EXOGYM_CHECK_INTERNAL(state != nullptr, "no recovery state delivered");
  strategy_.load_recovery_state(model_, *state);
  membership_.loaded();
  if (client_state_) {
    phase_ = "loading the state of client " + std::to_string(ctx_.client) + " into " + strategy_name_;
    client_state_->load_client_state(membership_.client_store()->handed(ctx_.client));
  }
  // An asynchronous node continues from the server's model instead.
  if (asynchronous_) s_.simulation->async().rejoin(rank_);
}

}  // namespace exogym::runtime::train
