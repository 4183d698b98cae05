#pragma once
// The collective API a strategy uses to talk to the other nodes.
//
// Collectives are SPMD rendezvous: every node calls the same collectives in the
// same order with tensors of the same shapes and dtypes (all_gather excepted:
// shapes may differ between ranks). Every call also takes a list of tensors, so
// a strategy reduces all of its parameters in one call.
//
// Reductions combine ranks in rank order (0, 1, ..., K-1), so results are
// bit-identical whatever the thread scheduling.
//
// The runtime implements it; a strategy (or a communication module) calls
// the NodeContext's communicator from its own node's thread only, in init()
// and step(). A collective returns once every node has made the matching
// call; what it sends is metered (bytes, simulated time). It throws:
//   AbortedError  another node failed (or the run was interrupted). Let it
//                 propagate: the run reports the first real error.
//   Error         the nodes' calls do not match (another collective, op or
//                 root, or other tensor counts, shapes or dtypes): a
//                 strategy bug. Every node's collective fails, the run ends.
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace exogym::sdk {

enum class ReduceOp { Sum, Avg, Min, Max };

const char* to_string(ReduceOp op);

// A collective's result that the nodes of a process may hold in common:
// read only.
using SharedTensors = std::shared_ptr<const std::vector<at::Tensor>>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This node's rank and the number of nodes (ctx.rank, ctx.num_nodes).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: afterwards every rank holds op(tensor of rank 0, ..., rank K-1).
  // Avg is the rank-ordered sum divided by K.
  virtual void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum) = 0;

  // op(tensors of rank 0, ..., rank K-1), the same bits all_reduce gives,
  // returned instead of written into `tensors` (which stay as they were).
  // The nodes of a process may receive the very same tensors, so the result
  // is read only: for a result a strategy needs once per process, as
  // DiLoCo's outer step on its shared master, which would otherwise write
  // the average into every node's tensors only to overwrite it. Metered as
  // an all_reduce of `tensors`. The default (for communicators that do not
  // override it) all-reduces copies.
  virtual SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);

  // In place: afterwards every rank holds root's tensors.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root = 0) = 0;

  // Returns result[r][i] = rank r's tensors[i] (fresh tensors, ordered by rank).
  virtual std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) = 0;

  // Returns once every node has called it.
  virtual void barrier() = 0;

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
