#pragma once
// Non-blocking collectives: Communicator's all_reduce_async,
// all_reduce_shared_async, broadcast_async and all_gather_async (comm.h)
// start a collective and return a handle, a Pending, at once; its wait()
// returns the result. A strategy that calls them includes this header.
//
//   pending_ = ctx.comm->all_reduce_async(deltas, sdk::ReduceOp::Avg);
//   ... k steps later:
//   std::vector<at::Tensor> mean = pending_.wait();
//
// The rules:
//   - Every node starts the same collectives in the same order, blocking
//     and non-blocking ones counted together, as for any collective
//     (comm.h); wait() is each node's own: nodes may wait at different
//     points.
//   - On the simulated clock the transfer runs concurrently with the node's
//     compute from the moment it starts; wait() moves the node's clock to
//     the transfer's end if that is later, so the node pays only for what
//     is left. A node's transfers take its link one after another, in the
//     order they started, blocking collectives included
//     (docs/simulation.md#overlapping-communication-with-compute).
//   - Bytes are counted once, at the start, exactly as the blocking call's,
//     in the same comm.csv row.
//   - The result is the blocking call's, bit for bit. The runtime moves the
//     data at the start: the start waits, in wall time, for every node to
//     call it, and throws AbortedError on an abort, as a blocking
//     collective does; wait() never waits for another node. Still, between
//     the start and wait() a strategy neither reads nor writes the tensors
//     a handle holds (all_reduce_async's and broadcast_async's arguments,
//     which they update in place): on a backend that overlaps for real the
//     transfer would still be using them, and reading them early would read
//     the future. Use what wait() returns.
//   - A handle may stay in flight across steps and across a checkpoint:
//     save_state saves it with save(), load_state takes it back with load(),
//     and a resume in the middle of the overlap is exact. save_state is
//     const, so it cannot wait(). The default recovery state (strategy.h)
//     carries the handles to a node that rejoins; a node that fails loses
//     its own (waiting for one of those is an sdk::Error).
//   - Communicators that do not override them (test doubles) make the
//     blocking call and return a handle that is complete (completed_work).
//   - A handle destroyed or assigned over without wait() stops the run at
//     the end of the step it was dropped in, naming the node, the step, the
//     strategy and the collective (no hang).
//   - A handle may still be in flight after the run's last step (an outer
//     step that would land in the next round): the last checkpoint keeps
//     it in flight, so a run extended from there waits for it where the
//     strategy does, bit for bit and clock included; the finished run lands
//     it after that checkpoint, its clock moving to the transfer's end.
//     Such a handle may then be destroyed without wait().
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"

namespace exogym::sdk {

// The same as strategy.h's: named tensors of a checkpoint.
using StateDict = std::map<std::string, at::Tensor>;

// The runtime's side of a collective started and not yet waited for
// (LibTorch's c10d::Work). A strategy holds it through a Pending.
class Work {
 public:
  virtual ~Work() = default;
  // Completes the collective for this node; called once, by Pending::wait.
  virtual void wait() = 0;
  // What a checkpoint keeps of it (opaque: Communicator::resume_work takes
  // it back).
  virtual at::Tensor record() const = 0;
};

// A Work that is complete already: what the default *_async functions
// return (for communicators without overlap, test doubles included).
std::unique_ptr<Work> completed_work();

namespace detail {
// Pending's checkpoint helpers, one per kind of result.
void save_pending(StateDict& out, const std::string& prefix, const Work& work, const std::vector<at::Tensor>& result);
void save_pending(StateDict& out, const std::string& prefix, const Work& work, const SharedTensors& result);
void save_pending(StateDict& out, const std::string& prefix, const Work& work,
                  const std::vector<std::vector<at::Tensor>>& result);
std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, std::vector<at::Tensor>& result);
std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, SharedTensors& result);
std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, std::vector<std::vector<at::Tensor>>& result);
[[noreturn]] void throw_nothing_pending();
}  // namespace detail

// A non-blocking collective's handle: movable, not copyable.
template <class Result>
class Pending {
 public:
  Pending() = default;  // holds nothing: valid() is false
  Pending(std::unique_ptr<Work> work, Result result) : work_(std::move(work)), result_(std::move(result)) {}

  // Whether it holds a collective not yet waited for.
  bool valid() const { return work_ != nullptr; }

  // Completes the collective (the node's clock moves to the transfer's end
  // if it is later) and returns its result; afterwards valid() is false.
  // sdk::Error when it holds nothing.
  Result wait() {
    if (!work_) detail::throw_nothing_pending();
    work_->wait();
    work_.reset();
    return std::move(result_);
  }

  // Checkpoints, from save_state and load_state: the result and the
  // runtime's record under keys that start with `prefix` (nothing when
  // !valid()). load() gives back what save() saved, the result's tensors
  // on `device`, or a Pending that holds nothing when `in` has no such keys;
  // after a resume, wait() returns these restored tensors, not the ones
  // the collective was started with.
  void save(StateDict& out, const std::string& prefix) const {
    if (work_) detail::save_pending(out, prefix, *work_, result_);
  }
  static Pending load(const StateDict& in, const std::string& prefix, Communicator& comm,
                      c10::Device device = c10::Device(c10::kCPU)) {
    Pending pending;
    pending.work_ = detail::load_pending(in, prefix, comm, device, pending.result_);
    return pending;
  }

 private:
  std::unique_ptr<Work> work_;
  Result result_;
};

}  // namespace exogym::sdk
