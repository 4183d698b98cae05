#pragma once
// Stacked execution (docs/performance.md#stacked-execution). The nodes of
// this process that share a device keep their parameters and buffers in
// stacks of shape [K, ...], each node's tensor a view of its row: set-up
// makes the stacks before the initial broadcast, so that everything after
// (strategies, optimizers, checkpoints, model files) holds the views and
// sees one node's tensors as in a per-node run. Each step, every live node
// of a stack arrives with its micro-batches, and the stack's worker thread
// runs the model's stacked_loss (sdk/model.h) over the live nodes' rows
// once for all of them while they wait; each node leaves with its loss and
// its gradients, views of the stacked gradient, and takes its strategy's
// step on its own thread as always. With failures or partial participation
// the live nodes' rows are gathered into smaller stacks for the step (their
// buffers scattered back after it).
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/replicas.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/stacked.h"

namespace spdlog {
class logger;
}
namespace exogym::runtime::output {
class Progress;
}
namespace exogym::runtime::sim {
class NodeMeter;
}
namespace exogym::runtime::threads {
class NodeSlot;
}

namespace exogym::runtime::train {

class Cluster;
class StackGroup;

// How a process's nodes compute, and why not stacked where they do not.
struct ExecutionChoice {
  bool stacked = false;
  std::string reason;           // why per node: "" when stacked
  std::vector<int> stacks;      // the nodes of each stack, in device order
  std::vector<int> part_sizes;  // by stack: the nodes of a part (stack_compute.cpp)
  // Stacked: the node-steps whose local step was taken with the stack's
  // (LocalStep::step_together) and apart, and why the first apart were; of
  // those together, the ones taken right after the backward, part by part.
  int64_t steps_together = 0, steps_apart = 0, steps_after_backward = 0;
  std::string apart_because;
  // Where a stack's passes hold fewer nodes than planned: why (a pass of
  // more ran out of memory in the first step, StackGroup::compute_fitting).
  std::string parts_because;
};

class NodeStacks {
 public:
  // Chooses the execution of this process's nodes (`block`) from
  // m.execution, the model and the replicas and, when stacked, moves each
  // device's replicas' parameters and buffers into stacks. Throws
  // sdk::ConfigError at "execution" when m.execution is "stacked" and it
  // cannot be, naming the reason. From set-up, before the initial broadcast.
  NodeStacks(const manifest::Manifest& m, Replicas& replicas, const std::vector<c10::Device>& devices,
             const dist::NodeBlock& block, const std::string& model_name);
  ~NodeStacks();
  NodeStacks(const NodeStacks&) = delete;
  NodeStacks& operator=(const NodeStacks&) = delete;

  // The choice, as summary.json reports it.
  ExecutionChoice choice() const;
  // Whether node `rank` computes in a stack.
  bool stacked(int rank) const;
  // Node `rank` after its strategy's init(), before its first step: an
  // asynchronous strategy (its nodes compute in slots of their own) makes
  // every node of the process compute on its own (the stacks stay, as
  // views, unused), or under "stacked" throws sdk::ConfigError at
  // "execution" naming it. Returns whether the node computes stacked.
  bool start_node(int rank, bool asynchronous);
  // Says how the nodes compute, and why not stacked where they do not: in
  // the log, and at the end of the progress line.
  void report(output::Progress& progress, spdlog::logger& log) const;

  // Before the node threads start, and until they have all ended: the
  // stacks meet among `cluster`'s nodes, follow its live nodes, and compute
  // on a worker thread that shares their nodes among `compute_slots`
  // threads (itself included; the slots its waiting nodes leave), each of
  // `intra_op_threads`, a node's: a reduction's bits depend on how many
  // threads share it, so that a stack computes what its nodes would on
  // their own threads.
  void connect(Cluster& cluster, manifest::Precision precision, int intra_op_threads, int compute_slots);
  void disconnect();

  // Node `rank`'s forward and backward over `micro_batches` (on its
  // device), with the other live nodes of its stack. Returns the sum of its
  // micro-batches' losses; its parameters' gradients are set (the sum over
  // its micro-batches, as backward() leaves them). `slot` is given back
  // while the node waits; `meter` counts the node's share of the stack's
  // compute time. No micro-batches: the node idles through the step
  // (Strategy::computes) and the stack computes without it. Throws what the
  // model threw on one of the stack's nodes, which ends the run,
  // sdk::AbortedError on the others.
  double forward_backward(int rank, const std::vector<sdk::Batch>& micro_batches, threads::NodeSlot* slot,
                          sim::NodeMeter& meter);

  // Node `rank`'s local step in its step t (LocalStep::step, through its
  // StackedStepsOfNode): it waits for the other live nodes of its stack,
  // and their steps are taken at once (LocalStep::step_together). False
  // when they are not (their optimizers or tensors do not stack, a node
  // brought none, or this node took one already in step t): the node takes
  // its own. end_step, after the strategy's step: the node comes to the
  // meeting without a step if it has not been there in step t.
  bool take_step(int rank, int64_t t, sdk::LocalStep& step, threads::NodeSlot* slot, sim::NodeMeter& meter);
  void end_step(int rank, int64_t t, threads::NodeSlot* slot, sim::NodeMeter& meter);
  // Node `rank`'s strategy takes `step` first thing after the backward of
  // its step t (sdk::StackedSteps::take_after_backward): its stack may take
  // it right after the backward, and take_step then says it was taken.
  void take_after_backward(int rank, int64_t t, sdk::LocalStep& step);

 private:
  StackGroup& group(int rank) const;

  mutable std::mutex mutex_;  // guards choice_ (start_node)
  ExecutionChoice choice_;
  manifest::Execution requested_;
  dist::NodeBlock block_;
  std::vector<std::unique_ptr<StackGroup>> groups_;
  std::vector<int> group_of_;  // by rank - block.first: its stack, or -1
};

// What a stacked node's NodeContext::stack is: its local steps go to its
// stack (NodeStacks::take_step), in the step its context is at.
class StackedStepsOfNode final : public sdk::StackedSteps {
 public:
  StackedStepsOfNode(NodeStacks& stacks, const sdk::NodeContext& ctx, threads::NodeSlot* slot, sim::NodeMeter& meter)
      : stacks_(stacks), ctx_(ctx), slot_(slot), meter_(meter) {}
  bool take(sdk::LocalStep& step) override { return stacks_.take_step(ctx_.rank, ctx_.step, step, slot_, meter_); }
  void take_after_backward(sdk::LocalStep& step) override { stacks_.take_after_backward(ctx_.rank, ctx_.step, step); }

 private:
  NodeStacks& stacks_;
  const sdk::NodeContext& ctx_;
  threads::NodeSlot* slot_;
  sim::NodeMeter& meter_;
};

}  // namespace exogym::runtime::train
