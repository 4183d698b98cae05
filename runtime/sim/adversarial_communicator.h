#pragma once
// A node's communicator with its "adversaries" entries applied
// (adversary_spec.h): what it contributes to the strategy's collectives is
// corrupted on the way out while an entry is active.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exogym/runtime/sim/adversary_spec.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/pending.h"

namespace exogym::runtime::sim {

// Node `rank`'s communicator with its entries of `adversaries` applied
// (wraps `inner`, which must outlive it). `step` is the node's current step
// (its NodeContext's), read at each call. A corrupted root of a
// broadcast keeps its own values.
class AdversarialCommunicator final : public sdk::Communicator {
 public:
  AdversarialCommunicator(sdk::Communicator& inner, std::vector<AdversarySpec> mine, uint64_t run_seed,
                          const int64_t* step);

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int place() const override { return inner_.place(); }
  void all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  sdk::SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  void broadcast(std::vector<at::Tensor>& tensors, int root) override;
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override;
  void barrier() override { inner_.barrier(); }
  sdk::Pending all_reduce_async(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  sdk::Pending all_gather_async(const std::vector<at::Tensor>& tensors) override;
  sdk::Pending all_to_all_async(const std::vector<at::Tensor>& tensors) override;
  std::unique_ptr<sdk::InFlight> resume(const at::Tensor& record) override { return inner_.resume(record); }
  void group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  std::vector<std::vector<at::Tensor>> group_all_gather(const std::vector<int>& members,
                                                        const std::vector<at::Tensor>& tensors) override;
  std::vector<at::Tensor> exchange(int peer, const std::vector<at::Tensor>& tensors) override;

  using sdk::Communicator::all_gather;
  using sdk::Communicator::all_reduce;
  using sdk::Communicator::broadcast;

 private:
  // What this node sends in place of `tensors` now: corrupted copies while
  // an entry is active, else the tensors themselves.
  std::vector<at::Tensor> outgoing(const std::vector<at::Tensor>& tensors);

  sdk::Communicator& inner_;
  std::vector<AdversarySpec> mine_;
  uint64_t run_seed_;
  const int64_t* step_;
  int64_t call_step_ = -1;  // the step `calls_` counts in
  uint64_t calls_ = 0;      // collectives so far in that step: each call's noise differs
};

}  // namespace exogym::runtime::sim
