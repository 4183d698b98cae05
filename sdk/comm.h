#pragma once
// The collective API a strategy uses to talk to the other nodes.
//
// Collectives are SPMD rendezvous: every node calls the same collectives in the
// same order with tensors of the same shapes and dtypes (all_gather excepted:
// shapes may differ between ranks), each on a list of tensors. Reductions
// combine ranks in rank order (0, 1, ..., K-1): the same bits whatever the
// thread scheduling. The *_async ones start now and finish later (pending.h).
//
// A strategy (or a communication module) calls it from its own node's thread
// only, in init() and step(). A collective returns once every node has made
// the matching call; it is metered (bytes, simulated time). It throws:
//   AbortedError  another node failed (or the run was interrupted). Let it
//                 propagate: the run reports the first real error.
//   Error         the nodes' calls do not match (collective, op, root, tensor
//                 counts, shapes, dtypes): a strategy bug; the run ends.
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace exogym::sdk {

enum class ReduceOp { Sum, Avg, Min, Max };

const char* to_string(ReduceOp op);

// A result the nodes of a process may hold in common: read only.
using SharedTensors = std::shared_ptr<const std::vector<at::Tensor>>;

class Work;  // the non-blocking collectives' handles (pending.h)
template <class Result>
class Pending;
using PendingTensors = Pending<std::vector<at::Tensor>>;
using PendingShared = Pending<SharedTensors>;
using PendingGather = Pending<std::vector<std::vector<at::Tensor>>>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This node's rank and the number of nodes (ctx.rank, ctx.num_nodes).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: afterwards every rank holds op(tensor of rank 0, ..., rank K-1).
  // Avg is the rank-ordered sum divided by K.
  virtual void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum) = 0;

  // all_reduce's bits, returned instead of written into `tensors`; the nodes
  // of a process may share them, so read only (DiLoCo's outer step on its
  // shared master). Metered as an all_reduce; the default all-reduces copies.
  virtual SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);

  // In place: afterwards every rank holds root's tensors.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root = 0) = 0;

  // Returns result[r][i] = rank r's tensors[i] (fresh tensors, ordered by rank).
  virtual std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) = 0;

  // Returns once every node has called it.
  virtual void barrier() = 0;

  // The same collectives, started (pending.h; the defaults block).
  virtual PendingTensors all_reduce_async(std::vector<at::Tensor> tensors, ReduceOp op = ReduceOp::Sum);
  virtual PendingShared all_reduce_shared_async(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  virtual PendingTensors broadcast_async(std::vector<at::Tensor> tensors, int root = 0);
  virtual PendingGather all_gather_async(const std::vector<at::Tensor>& tensors);
  // A handle's Work::record from a checkpoint, back in flight (Pending::load).
  virtual std::unique_ptr<Work> resume_work(const at::Tensor& record);

  // Single-tensor conveniences. The tensor is updated in place.
  void all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    std::vector<at::Tensor> list{tensor};
    all_reduce(list, op);
  }
  void broadcast(const at::Tensor& tensor, int root = 0) {
    std::vector<at::Tensor> list{tensor};
    broadcast(list, root);
  }
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) {
    std::vector<at::Tensor> result;
    for (auto& per_rank : all_gather(std::vector<at::Tensor>{tensor})) result.push_back(per_rank.at(0));
    return result;
  }
};

}  // namespace exogym::sdk
