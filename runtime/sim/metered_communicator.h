#pragma once
// Exact communication accounting: every node's communicator is wrapped in a
// MeteredCommunicator, so bytes are counted by the runtime, at each tensor's
// real dtype and size, and no strategy counts anything itself.
//
// A non-blocking collective runs the inner communicator's blocking call at
// its start (the nodes meet then, in wall time, and the data moves): the
// overlap lives on the simulated clock only, where its transfer is in
// flight until the handle's wait() (node_meter.h). So it works over every
// backend, several processes included, with the blocking call's bits.
#include <memory>
#include <vector>

#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/sim/traffic_source.h"
#include "exogym/sdk/pending.h"

namespace exogym::runtime::sim {

// A communicator that counts what passes through `inner` as traffic of
// `source` and moves the node's clock.
class MeteredCommunicator final : public sdk::Communicator {
 public:
  // `live` (may be null: every node): the live ranks, in rank order, while
  // nodes may be down; a collective's traffic and time are those over them.
  MeteredCommunicator(sdk::Communicator& inner, NodeMeter& meter, TrafficSource source,
                      const std::vector<int>* live = nullptr)
      : inner_(inner), meter_(meter), source_(source), live_(live) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int place() const override { return position(rank()); }
  void all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  sdk::SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  void broadcast(std::vector<at::Tensor>& tensors, int root) override;
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override;
  void barrier() override;

  sdk::Pending all_reduce_async(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  sdk::Pending all_gather_async(const std::vector<at::Tensor>& tensors) override;
  sdk::Pending all_to_all_async(const std::vector<at::Tensor>& tensors) override;
  std::unique_ptr<sdk::InFlight> resume(const at::Tensor& record) override;

  // Only the members pay, over their slowest link (network_model.h); the
  // node's view of the cluster's bytes adds the group's total times the
  // live nodes over the members.
  void group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  std::vector<std::vector<at::Tensor>> group_all_gather(const std::vector<int>& members,
                                                        const std::vector<at::Tensor>& tensors) override;
  std::vector<at::Tensor> exchange(int peer, const std::vector<at::Tensor>& tensors) override;

  using sdk::Communicator::all_gather;
  using sdk::Communicator::all_reduce;
  using sdk::Communicator::broadcast;

 private:
  // What a collective costs on the simulated network.
  struct Cost {
    CollectiveKind kind = CollectiveKind::AllReduce;
    Traffic mine;
    double cluster_sent = 0;
    double seconds = 0;
  };
  Cost all_reduce_cost(const std::vector<at::Tensor>& tensors) const;
  Cost broadcast_cost(const std::vector<at::Tensor>& tensors, int root) const;
  Cost all_gather_cost(const std::vector<std::vector<at::Tensor>>& gathered) const;
  // After the inner call: a blocking collective's end, or a non-blocking
  // one's start, whose handle's Work this returns (a complete one for the
  // runtime's traffic, which moves no clock).
  void finish(const Cost& cost);
  // A subgroup's collective over `members` (cost.cluster_sent: the group's).
  void finish_group(const Cost& cost, size_t members);
  std::unique_ptr<sdk::InFlight> start(const Cost& cost);
  // A rank's place among the live nodes (the rank itself when all are).
  int position(int rank) const;

  sdk::Communicator& inner_;
  NodeMeter& meter_;
  TrafficSource source_;
  const std::vector<int>* live_;
};

}  // namespace exogym::runtime::sim
