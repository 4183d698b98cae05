#pragma once
// Exact communication accounting: every node's communicator is wrapped in a
// MeteredCommunicator, so bytes are counted by the runtime, at each tensor's
// real dtype and size, and no strategy counts anything itself.
#include <functional>
#include <vector>

#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/sim/traffic_source.h"
#include "exogym/sdk/comm.h"

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
  void all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  sdk::SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  void broadcast(std::vector<at::Tensor>& tensors, int root) override;
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override;
  void barrier() override;

  using sdk::Communicator::all_gather;
  using sdk::Communicator::all_reduce;
  using sdk::Communicator::broadcast;

 private:
  // Runs `reduce`, metered as an all_reduce of `tensors`.
  void metered_all_reduce(const std::vector<at::Tensor>& tensors, const std::function<void()>& reduce);
  // A rank's place among the live nodes (the rank itself when all are).
  int position(int rank) const;

  sdk::Communicator& inner_;
  NodeMeter& meter_;
  TrafficSource source_;
  const std::vector<int>* live_;
};

}  // namespace exogym::runtime::sim
