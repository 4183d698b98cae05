#pragma once
// Non-blocking collectives: Communicator's all_reduce_async,
// all_gather_async and all_to_all_async (comm.h) and quantized_comm.h's
// quantized_mean_async start a collective and return a handle, a Pending,
// at once; its wait() returns the result. One handle for every one of
// them: it holds tensors on their way, waits, and saves and loads itself. A
// strategy that calls them includes this header.
//
//   pending_ = ctx.communicator().all_reduce_async(deltas, sdk::ReduceOp::Avg);
//   ... k steps later:
//   std::vector<at::Tensor> mean = pending_.wait();
//
// What wait() returns: all_reduce_async, all_reduce_shared's result (read only); all_gather_async,
// every rank's tensors in one list, rank by rank (rank r's tensors[i] at r * tensors.size() + i);
// all_to_all_async, given size() parts of m tensors, part p for the node at place p alone (comm.h's
// place()), the parts sent to this node, m per node in place order; quantized_mean_async, the mean.
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
//     collective does; wait() never waits for another node. The tensors
//     passed are read at the start: the strategy may change them after it.
//     What wait() returns may be shared by the nodes of a process
//     (all_reduce_async's is all_reduce_shared's): read it, copy what you
//     change.
//   - A handle may stay in flight across steps and across a checkpoint:
//     save_state saves it with save(), load_state takes it back with load(),
//     and a resume in the middle of the overlap is exact. save_state is
//     const, so it cannot wait(). The default recovery state (strategy.h)
//     carries the handles to a node that rejoins; a node that fails loses
//     its own (waiting for one of those is an sdk::Error).
//   - Communicators that do not override the non-blocking calls (test
//     doubles) make the blocking call and return a handle that is complete.
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

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/state_dict.h"

namespace exogym::sdk {

// The runtime's side of a collective started and not yet waited for (what
// c10d calls its Work): a Communicator makes one, a Pending holds it.
class InFlight {
 public:
  virtual ~InFlight() = default;
  // Completes the collective for this node; called once, by Pending::wait.
  virtual void wait() = 0;
  // What a checkpoint keeps of it (opaque: Communicator::resume takes it
  // back).
  virtual at::Tensor record() const = 0;
};

// An InFlight that is complete already: what the default non-blocking
// calls return (communicators without overlap, test doubles included).
std::unique_ptr<InFlight> completed();

namespace detail {
// What wait() makes of the tensors that arrived: a quantized mean
// dequantizes and averages them (quantized_comm.h). Saved with the handle.
class Decoding {
 public:
  virtual ~Decoding() = default;
  virtual std::vector<at::Tensor> decode(const std::vector<at::Tensor>& arrived) const = 0;
  virtual void save(StateDict& out, const std::string& prefix) const = 0;
};
// The Decoding saved under `prefix`, or null when none was.
std::shared_ptr<const Decoding> load_decoding(const StateDict& in, const std::string& prefix, c10::Device device);
}  // namespace detail

// A non-blocking collective's handle: movable, not copyable.
class Pending {
 public:
  Pending();  // holds nothing: valid() is false
  // For communicators and the SDK: `arrived` becomes the result when
  // `in_flight` completes (through `decoding`, when given).
  Pending(std::unique_ptr<InFlight> in_flight, std::vector<at::Tensor> arrived,
          std::shared_ptr<const detail::Decoding> decoding = nullptr);
  // The same handle, whose wait() returns what `decoding` makes of what
  // arrives (for the SDK: quantized_mean_async).
  Pending decoded_by(std::shared_ptr<const detail::Decoding> decoding) &&;
  // For the SDK (quantized_comm.h's reduce-scatter): the next collective,
  // started at once by `next` from this one's result (the runtime moved
  // the data at the start, above); the handle returned is next's, whose
  // wait() waits for both transfers, and which saves and loads both.
  Pending and_then(const std::function<Pending(std::vector<at::Tensor>)>& next) &&;
  Pending(Pending&&) noexcept;
  Pending& operator=(Pending&&) noexcept;
  ~Pending();

  // Whether it holds a collective not yet waited for.
  bool valid() const { return in_flight_ != nullptr; }

  // Completes the collective (the node's clock moves to the transfer's end
  // if it is later) and returns its result; afterwards valid() is false.
  // sdk::Error when it holds nothing.
  std::vector<at::Tensor> wait();

  // Checkpoints, from save_state and load_state: what is on its way, what
  // wait() needs to make the result of it, and the runtime's record, under
  // keys that start with `prefix` (nothing when !valid()). load() gives
  // back what save() saved, the result to come on `device`, or a Pending
  // that holds nothing when `in` has no such keys; after a resume, wait()
  // returns what these restored tensors make.
  void save(StateDict& out, const std::string& prefix) const;
  static Pending load(const StateDict& in, const std::string& prefix, Communicator& comm,
                      c10::Device device = c10::Device(c10::kCPU));

 private:
  std::unique_ptr<InFlight> in_flight_;
  std::unique_ptr<InFlight> before_;  // and_then's first transfer, if any
  std::vector<at::Tensor> arrived_;
  std::shared_ptr<const detail::Decoding> decoding_;
};

}  // namespace exogym::sdk
