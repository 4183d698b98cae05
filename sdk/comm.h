#pragma once
// The collective API a strategy uses to talk to the other nodes.
//
// Collectives are SPMD rendezvous: every node calls the same collectives in the same order with tensors
// of the same shapes and dtypes (all_gather: shapes may differ), each on a list of tensors. Reductions
// combine ranks in rank order: the same bits whatever the scheduling. *_async: pending.h. Called from
// the node's own thread, in init() and step(); metered. It throws:
//   AbortedError  another node failed (or the run was interrupted): let it go.
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

class InFlight;  // the non-blocking collectives' handle (pending.h)
class Pending;

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This node's rank, the number of live nodes, and its place among them
  // (0 ... size() - 1 in rank order: its rank while all are up).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int place() const { return rank(); }

  // In place: every rank gets op(rank 0's, ..., rank K-1's); Avg = sum / K.
  virtual void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum) = 0;

  // all_reduce's bits, returned instead of written into `tensors`; the nodes
  // of a process may share them, so read only (DiLoCo's outer step on its
  // shared master). Metered as an all_reduce; the default all-reduces copies.
  virtual SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);

  // In place: afterwards every rank holds root's tensors.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root = 0) = 0;

  // Returns result[r][i] = rank r's tensors[i] (fresh tensors, ordered by rank).
  virtual std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) = 0;

  virtual void barrier() = 0;  // returns once every node has called it

  // Non-blocking (pending.h): the collective starts now, Pending::wait()
  // returns its result. all_reduce_async's is all_reduce_shared's (read
  // only); all_gather_async's is every rank's tensors in one list, rank by
  // rank (rank r's tensors[i] at r * tensors.size() + i); all_to_all_async
  // sends part p of `tensors` (size() parts of m) to the node at place p
  // alone and returns the parts sent to this node, in place order. The
  // defaults block.
  virtual Pending all_reduce_async(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  virtual Pending all_gather_async(const std::vector<at::Tensor>& tensors);
  virtual Pending all_to_all_async(const std::vector<at::Tensor>& tensors);
  // A handle's InFlight::record from a checkpoint, back in flight
  // (Pending::load).
  virtual std::unique_ptr<InFlight> resume(const at::Tensor& record);

  // Only `members` (ascending live ranks, this one among them) or this node
  // and `peer` take part; docs/plugins.md#subgroups-and-peers.
  virtual void group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors,
                                ReduceOp op = ReduceOp::Sum);
  virtual std::vector<std::vector<at::Tensor>> group_all_gather(const std::vector<int>& members,
                                                                const std::vector<at::Tensor>& tensors);
  virtual std::vector<at::Tensor> exchange(int peer, const std::vector<at::Tensor>& tensors);

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
