#pragma once
// One stack of stacked execution (node_stacks.h): the nodes of one device,
// their parameters and buffers moved into [K, ...] stacks (each node's
// tensor a view of its row), and the meetings where its live nodes compute
// their forward and backward together, and take their local steps
// together, on the stack's worker thread: right after the backward, part by
// part of the stack, where the strategies take their local step first
// (stack_compute.cpp), or at a meeting of their own.
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/replicas.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::comm {
class MeetingPoint;
}
namespace exogym::runtime::sim {
class NodeMeter;
}
namespace exogym::sdk {
class LocalStep;
class NodeWorkers;
}  // namespace exogym::sdk
namespace exogym::runtime::host {
class BlockCacheRoom;
}
namespace exogym::runtime::threads {
class NodeSlot;
class WorkerThread;
}  // namespace exogym::runtime::threads

namespace exogym::runtime::train {

class Cluster;

// On the CPU a stack computes and steps in parts, side by side on its
// compute slots, each part from its forward to its local step on one thread.
// A part's gradients take at most this many bytes (a node with more is a
// part by itself), so that its parameters and gradients are still in the
// core's caches when it steps, and every compute slot has a part. 8
// nanoGPT-small nodes (3.3 MB of gradients each) compute one per part; 64
// MLP nodes (0.8 MB) five; parts of 2, 8 or 16 MiB were slower overall
// (docs/performance.md#stacked-execution). A part's gradients are alive only
// from its backward to its step. EXOGYM_STACK_PART_BYTES sets another size.
constexpr size_t kStackPartGradientBytes = size_t{4} << 20;

// The nodes of each part of a stack of `members` whose nodes have
// `node_gradient_bytes` of gradients on the CPU (0: on a GPU, the whole
// stack), computing in `compute_slots`.
int stack_part_size(int members, size_t node_gradient_bytes, int compute_slots);

// Why the replicas of `ranks` cannot share stacks (their parameters or
// buffers differ in names, shapes, dtypes or devices), or nullopt.
std::optional<std::string> replicas_differ(const Replicas& replicas, const std::vector<int>& ranks);

class StackGroup {
 public:
  // Moves the parameters and buffers of the replicas of `ranks` (ascending;
  // replicas_differ found nothing) into stacks, one tensor at a time.
  StackGroup(Replicas& replicas, std::vector<int> ranks);
  ~StackGroup();
  StackGroup(const StackGroup&) = delete;
  StackGroup& operator=(const StackGroup&) = delete;

  const std::vector<int>& ranks() const { return ranks_; }
  // The local steps so far, once the nodes have stopped (ExecutionChoice).
  int64_t steps_together() const { return steps_together_; }
  int64_t steps_apart() const { return steps_apart_; }
  int64_t steps_after_backward() const { return steps_after_backward_; }
  int part_size() const { return std::min(part_size_, fitting_.load()); }  // once connected
  const std::string& apart_because() const { return apart_because_; }
  // Why a pass holds fewer nodes than the stack's parts would ("": it
  // does not; compute_fitting), once the nodes have stopped.
  const std::string& parts_because() const { return fitted_because_; }

  // node_stacks.h's connect() and disconnect().
  void connect(Cluster& cluster, manifest::Precision precision, int intra_op_threads, int compute_slots);
  void disconnect();

  // NodeStacks::forward_backward for node `rank` of this stack; no
  // micro-batches: the node idles through the step, and the stack computes
  // without it.
  double forward_backward(int rank, const std::vector<sdk::Batch>& micro_batches, threads::NodeSlot* slot,
                          sim::NodeMeter& meter);

  // NodeStacks::take_step and end_step for node `rank` of this stack, in
  // its step t.
  bool take_step(int rank, int64_t t, sdk::LocalStep& step, threads::NodeSlot* slot, sim::NodeMeter& meter);
  // sdk::StackedSteps::take_after_backward for node `rank` in its step t,
  // before its forward_backward.
  void take_after_backward(int rank, int64_t t, sdk::LocalStep& step);
  void end_step(int rank, int64_t t, threads::NodeSlot* slot, sim::NodeMeter& meter);

  // The bytes of the gradients a step of this stack allocates in the CPU's
  // memory (its trainable stacks on the CPU; 0 on a GPU).
  size_t cpu_gradient_bytes() const;

 private:
  // One stacked tensor: a parameter (`trainable`: it gets gradients) or a
  // buffer, under every name the network gives it, and each node's view.
  struct Stacked {
    at::Tensor stack;
    std::vector<std::string> names;
    std::vector<at::Tensor> rows;  // by member: the node's own tensor
    bool trainable = false;
  };

  int member(int rank) const;
  // The meeting's work, on the worker thread: the live members' forward and
  // backward, their losses and gradients, and the local steps announced
  // for after the backward (stack_compute.cpp).
  void compute();
  // The forward and backward of `members` (ascending) over their rows of
  // the stacks, each node's gradients its rows of the part's.
  void compute_part(const std::vector<int>& members);
  // The local steps of `part`'s members at once, their gradients released;
  // or none, and why ("": taken).
  std::string step_part(const std::vector<int>& part, const std::vector<sdk::LocalStep*>& announced, int64_t t);
  void compute_apart(const std::vector<int>& members);
  void set_live(const std::vector<int>& live);
  // Member `index`'s arrival at the meeting of local steps, with its step
  // or none; whether its step was taken there.
  bool meet_for_step(int index, int64_t t, sdk::LocalStep* step, threads::NodeSlot* slot, sim::NodeMeter& meter);
  // After a meeting that failed: the first node to return hands on the
  // error (and ends the run); the others stop as if aborted.
  void throw_error_of(int rank, const std::string& what);
  c10::Device device() const;  // the stacks'
  // compute_part(members), and where `announced` (the step-first path) the
  // members' local steps after it (step_part, counted). In the first step a
  // pass of two or more nodes that runs out of memory is undone and taken
  // again in halves, which the later steps keep (fitting_).
  void compute_fitting(const std::vector<int>& members, const std::vector<sdk::LocalStep*>* announced, int64_t t);
  void count_part_steps(const std::vector<int>& part, const std::string& apart);
  // Inside a catch of running out of memory in compute(): the error that
  // says what the stack held and what to set instead.
  std::exception_ptr out_of_memory() const;
  // LocalStep::step_together(steps), where running out of memory is an
  // error that says it was the step's (the optimizer's state), not the
  // forward and backward's.
  std::string step_stacked(const std::vector<sdk::LocalStep*>& steps) const;

  // Keeps the CPU gradients of the whole stack in the block cache from
  // step to step where they all wait for the step meeting (no parts);
  // ends after the stacks.
  std::unique_ptr<host::BlockCacheRoom> gradient_room_;
  std::vector<int> ranks_;
  std::vector<sdk::Model*> models_;        // by member
  std::vector<at::Generator> generators_;  // by member
  std::vector<Stacked> parameters_, buffers_;

  Cluster* cluster_ = nullptr;
  manifest::Precision precision_ = manifest::Precision::Fp32;
  std::unique_ptr<threads::WorkerThread> worker_;
  // The compute slots of the waiting nodes, lent to the worker's layers
  // and local steps (sdk::NodeWorkers).
  std::unique_ptr<sdk::NodeWorkers> crew_;
  std::unique_ptr<comm::MeetingPoint> meeting_;

  // One step's meeting, by member: each node writes its own entries before
  // it arrives and reads them after; the work reads and writes them all in
  // between (the meeting orders the two).
  std::vector<const std::vector<sdk::Batch>*> batches_;
  std::vector<double> losses_;
  std::vector<int> live_;       // the live members, ascending
  std::vector<int> computing_;  // of those, the ones that brought micro-batches
  int part_size_ = 1;           // members per part (stack_compute.cpp)
  bool set_up_ = false;         // whether the stack has computed once
  bool first_step_ = false;     // while it computes its first step
  // The most nodes one pass of the forward and backward holds: all of
  // them, unless a pass of more ran out of memory in the first step
  // (compute_fitting), which it says in fitted_because_.
  std::atomic<int> fitting_{std::numeric_limits<int>::max()};
  std::string fitted_because_;
  // The local step each member announced for after its backward, in step
  // announced_in_ (null: none), and the one taken there, in step taken_in_
  // (-1: none; take_step hands it over once).
  std::vector<sdk::LocalStep*> announced_, taken_;
  std::vector<int64_t> announced_in_, taken_in_;
  double seconds_each_ = 0;
  std::exception_ptr error_;  // what the work threw: the run ends
  std::atomic<bool> error_taken_{false};

  // The meeting of the live members' local steps (LocalStep::step_together),
  // by member as above: the step each brought (null: none), the last step
  // index it arrived in, and whether the steps were taken together.
  std::unique_ptr<comm::MeetingPoint> step_meeting_;
  std::vector<sdk::LocalStep*> steps_;
  std::vector<int64_t> arrived_in_;
  bool steps_taken_ = false;
  double step_seconds_each_ = 0;
  // For summary.json: the node-steps taken together and apart, and why the
  // first ones apart were.
  int64_t steps_together_ = 0, steps_apart_ = 0, steps_after_backward_ = 0;
  std::string apart_because_;
  // Set once a meeting found no member with a local step (a strategy that
  // takes none, as DeMo): the members stop meeting for them.
  std::atomic<bool> no_local_steps_{false};
};

}  // namespace exogym::runtime::train
