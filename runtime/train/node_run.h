#pragma once
// One node's thread (run_nodes in node_loop.h starts one per node of this
// process): the initial broadcast or the restore from a checkpoint, the
// training steps with their evaluations, the membership changes and the
// checkpoints, and the final averaging into model.pt. It works on every
// part of the run, so it holds the whole TrainingState.
#include <c10/core/Device.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/sim/adversarial_communicator.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/threads/compute_slots.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/node_stacks.h"
#include "exogym/runtime/train/shared_objects.h"
#include "exogym/runtime/train/training_state.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/node.h"

namespace exogym::runtime::train {

// One node's run, on its own thread. `phase_` says what the node is doing,
// for the error that stops the run if it fails.
class NodeRun {
 public:
  NodeRun(TrainingState& s, train::Cluster& cluster, int rank, threads::NodeSlot& slot);
  void run();

 private:
  void start();
  void restore();
  // Before step t when the membership changes (membership.h): every node
  // meets; a donor first leaves its state, a node coming back then takes it
  // (recover), and the state of its client (node_membership.cpp).
  void change_membership(int64_t t);
  void offer_client_state(int64_t t);
  void recover(int64_t t);
  void train_step(int64_t t);
  // Step t's evaluation, if one is due (every node takes part).
  void evaluate_at(int64_t t);
  // Step t's compute: zero_grad, forward/backward, the strategy's step; its loss.
  double compute_step(int64_t t);
  // The reporting node's rows of step t (report_step); the others drop theirs.
  void report_or_drop(int64_t t, double loss);
  // Slot t of an asynchronous strategy (async/async_schedule.h): the reply
  // if it has come, the evaluation, the step if the node is free, then the
  // meeting where the updates travel.
  void async_slot(int64_t t);
  // What every node does at the start of step t, down or not: the step
  // index, and the check for Ctrl-C (the first node to see the request
  // stops the others at their next collective; with checkpoints boundary()
  // stops them instead). All a down node does.
  void start_step(int64_t t);
  // Where every node of the run meets (the checkpoints): the collective
  // backend's barrier, or with failures one that down nodes attend too.
  // `work` is done once per process while its nodes are there.
  void meet_every_node(const std::function<void()>& work = {});
  // After the last step before boundary `step` (steps done): a checkpoint
  // when one is due or a stop was requested; then, if stopping, stops.
  void boundary(int64_t step);
  void write_checkpoint(int64_t step);
  // The step's loss: the mean over its micro-batches (as their gradients).
  double forward_backward(const std::vector<int64_t>& indices);
  void report_step(int64_t t, double loss);
  void finish();

  TrainingState& s_;
  const manifest::Manifest& m_;
  train::Cluster& cluster_;
  Membership& membership_;
  const int rank_;
  threads::NodeSlot& slot_;
  sdk::Model& model_;
  sdk::Strategy& strategy_;
  const std::unique_ptr<sdk::Communicator> backend_;
  sim::NodeMeter& meter_;
  // What the strategy sends is metered as traffic a real cluster would carry;
  // the runtime's own collectives are counted apart and cost no simulated time.
  sim::MeteredCommunicator strategy_comm_, runtime_comm_;
  const c10::Device device_;
  NodeSharedObjects shared_;
  sdk::NodeContext ctx_;  // the strategy keeps a reference from init() on
  // The strategy's communicator when this node is one of the manifest's
  // "adversaries" (over strategy_comm_; null otherwise).
  std::unique_ptr<sim::AdversarialCommunicator> adversary_comm_;
  const std::string strategy_name_, model_name_;
  std::string phase_ = "initial broadcast";
  double last_loss_ = NAN;  // this node's, for the warning when it turns non-finite
  // An asynchronous strategy connected (async/async_schedule.h): the run goes
  // by slots.
  bool asynchronous_ = false;
  bool stacked_ = false;                               // computes its forward and backward in a stack (node_stacks.h)
  std::unique_ptr<StackedStepsOfNode> stacked_steps_;  // its ctx_.stack when stacked_
  // The strategy, when the run keeps its clients' state
  // (Strategy::has_client_state, with participation); null otherwise.
  sdk::Strategy* client_state_ = nullptr;
};

}  // namespace exogym::runtime::train
