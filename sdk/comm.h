#pragma once
// The collectives a strategy talks to the other nodes with.
//
// Every node calls the same collectives in the same order, blocking and non-blocking together, on lists of tensors of
// the same shapes and dtypes (all_gather: shapes may differ). Reductions combine ranks in rank order: the same bits
// whatever the scheduling. Called from the node's thread, in init() and step(); metered. They throw AbortedError when
// another node failed or the run was interrupted (let it go), and sdk::Error when the nodes' calls do not match (a
// strategy bug: the run ends).
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace exogym::sdk {

enum class ReduceOp { Sum, Avg, Min, Max };
const char* to_string(ReduceOp op);
// A result the nodes of a process may hold in common: read only.
using SharedTensors = std::shared_ptr<const std::vector<at::Tensor>>;

class InFlight;  // pending.h
class Pending;

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This node's rank, the number of live nodes, and its place among them (0 ... size() - 1 in rank order: its rank
  // while all are up).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int place() const { return rank(); }

  // In place: every rank gets op(rank 0's, ..., rank K-1's); Avg = sum / K.
  virtual void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum) = 0;
  // all_reduce's bits returned, shared by the nodes of a process (DiLoCo's outer step on its master).
  virtual SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  // In place: afterwards every rank holds root's tensors.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root = 0) = 0;
  // result[r][i] = rank r's tensors[i] (fresh tensors).
  virtual std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) = 0;
  virtual void barrier() = 0;

  // Non-blocking: the collective starts now, Pending::wait() returns its result (pending.h says which); resume() puts a
  // saved handle back in flight.
  virtual Pending all_reduce_async(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  virtual Pending all_gather_async(const std::vector<at::Tensor>& tensors);
  virtual Pending all_to_all_async(const std::vector<at::Tensor>& tensors);
  virtual std::unique_ptr<InFlight> resume(const at::Tensor& record);

  // Only `members` (ascending live ranks, this one among them), or this node and `peer`, take part
  // (docs/plugins.md#subgroups-and-peers).
  virtual void group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors,
                                ReduceOp op = ReduceOp::Sum);
  virtual std::vector<std::vector<at::Tensor>> group_all_gather(const std::vector<int>& members,
                                                                const std::vector<at::Tensor>& tensors);
  virtual std::vector<at::Tensor> exchange(int peer, const std::vector<at::Tensor>& tensors);

  // One tensor, updated in place; all_gather's is one tensor per rank.
  void all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  void broadcast(const at::Tensor& tensor, int root = 0);
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
};

}  // namespace exogym::sdk
