#include "exogym/runtime/comm/collective_backend.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

namespace {

// The tensors themselves where contiguous, else contiguous copies.
std::vector<at::Tensor> contiguous_payload(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> work;
  work.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!t.defined()) throw sdk::Error("collective called with an undefined tensor");
    work.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  return work;
}

class BackendCommunicator final : public sdk::Communicator {
 public:
  BackendCommunicator(CollectiveBackend& backend, int rank, threads::NodeSlot* slot)
      : backend_(backend), rank_(rank), slot_(slot) {}
  int rank() const override { return rank_; }
  int size() const override { return backend_.live_count(); }
  int place() const override {
    const auto& live = backend_.live_ranks();
    return static_cast<int>(std::lower_bound(live.begin(), live.end(), rank_) - live.begin());
  }

  void all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override {
    run_in_place(CallKind::AllReduce, tensors, op, 0);
  }
  sdk::SharedTensors all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override {
    CollectiveCall call;
    call.kind = CallKind::AllReduce;
    call.op = op;
    call.shared_result = true;
    call.tensors = contiguous_payload(tensors);
    return backend_.run(rank_, std::move(call), slot_);
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    if (root < 0 || root >= backend_.size()) {
      throw sdk::Error("broadcast: root " + std::to_string(root) + " is not a rank of " +
                       std::to_string(backend_.size()));
    }
    run_in_place(CallKind::Broadcast, tensors, sdk::ReduceOp::Sum, root);
  }
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override {
    return gather_in({}, tensors, false);
  }
  void group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override {
    check_group("group_all_reduce", rank_, members, backend_.live_ranks());
    run_in_place(CallKind::AllReduce, tensors, op, 0, members);
  }
  std::vector<std::vector<at::Tensor>> group_all_gather(const std::vector<int>& members,
                                                        const std::vector<at::Tensor>& tensors) override {
    check_group("group_all_gather", rank_, members, backend_.live_ranks());
    return gather_in(members, tensors, false);
  }
  std::vector<at::Tensor> exchange(int peer, const std::vector<at::Tensor>& tensors) override {
    if (peer == rank_) {
      throw sdk::Error("exchange by node " + std::to_string(rank_) + ": the peer is the node itself");
    }
    const std::vector<int> pair = {std::min(rank_, peer), std::max(rank_, peer)};
    check_group("exchange", rank_, pair, backend_.live_ranks());
    auto gathered = gather_in(pair, tensors, true);
    return std::move(gathered.at(peer < rank_ ? 0 : 1));
  }
  void barrier() override {
    CollectiveCall call;
    call.kind = CallKind::Barrier;
    backend_.run(rank_, std::move(call), slot_);
  }

 private:
  // An all_gather over every live node (no members) or over `members`.
  std::vector<std::vector<at::Tensor>> gather_in(const std::vector<int>& members,
                                                 const std::vector<at::Tensor>& tensors, bool exchange) {
    std::vector<std::vector<at::Tensor>> gathered;
    CollectiveCall call;
    call.kind = CallKind::AllGather;
    call.members = members;
    call.exchange = exchange;
    call.tensors = contiguous_payload(tensors);
    call.gathered = &gathered;
    backend_.run(rank_, std::move(call), slot_);
    return gathered;
  }
  void run_in_place(CallKind kind, std::vector<at::Tensor>& tensors, sdk::ReduceOp op, int root,
                    const std::vector<int>& members = {}) {
    CollectiveCall call;
    call.kind = kind;
    call.op = op;
    call.root = root;
    call.members = members;
    call.tensors = contiguous_payload(tensors);
    const std::vector<at::Tensor> work = call.tensors;
    backend_.run(rank_, std::move(call), slot_);
    // The results are in `work`: copy them into the tensors it does not share storage with.
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!work[i].is_same(tensors[i])) tensors[i].copy_(work[i]);
    }
  }

  CollectiveBackend& backend_;
  int rank_;
  threads::NodeSlot* slot_;
};

}  // namespace

std::unique_ptr<sdk::Communicator> make_communicator(CollectiveBackend& backend, int rank, threads::NodeSlot* slot) {
  return std::make_unique<BackendCommunicator>(backend, rank, slot);
}

}  // namespace exogym::runtime::comm
