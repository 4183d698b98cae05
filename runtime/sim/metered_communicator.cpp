#include "exogym/runtime/sim/metered_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "exogym/runtime/sim/payload.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

namespace {

// A transfer as a handle's record (sdk::InFlight::record): its fields as
// float64, which hold every id and step a run reaches exactly.
constexpr int64_t kRecordFields = 7;

at::Tensor record_of(const Transfer& t) {
  return at::tensor(std::vector<double>{static_cast<double>(t.id), static_cast<double>(static_cast<int>(t.kind)),
                                        static_cast<double>(t.step), t.start, t.begin, t.finish, t.seconds},
                    at::kDouble);
}

Transfer transfer_from_record(const at::Tensor& record) {
  if (record.scalar_type() != at::kDouble || record.dim() != 1 || record.numel() != kRecordFields)
    throw sdk::Error("a saved collective handle's record is not one of this runtime's (7 float64 values)");
  const at::Tensor r = record.cpu().contiguous();
  const double* v = r.data_ptr<double>();
  const double kind = v[1];
  const bool strategy_kind = kind >= 0 && (kind <= static_cast<int>(CollectiveKind::Barrier) ||
                                           kind == static_cast<int>(CollectiveKind::AllToAll));
  if (v[0] < 0 || !strategy_kind || v[2] < -1)
    throw sdk::Error("a saved collective handle's record holds no collective");
  Transfer t;
  t.id = static_cast<uint64_t>(v[0]);
  t.kind = static_cast<CollectiveKind>(static_cast<int>(kind));
  t.step = static_cast<int64_t>(v[2]);
  t.start = v[3];
  t.begin = v[4];
  t.finish = v[5];
  t.seconds = v[6];
  return t;
}

// A strategy collective in flight on the simulated clock. wait() is called
// on the node's thread during the run; the destructor may run after the
// node's meter is gone, so it touches only the shared list.
class MeteredInFlight final : public sdk::InFlight {
 public:
  MeteredInFlight(NodeMeter& meter, uint64_t ticket) : meter_(meter), in_flight_(meter.in_flight()), ticket_(ticket) {}
  ~MeteredInFlight() override {
    if (!waited_) in_flight_->abandon(ticket_);
  }
  void wait() override {
    waited_ = true;
    meter_.wait_transfer(ticket_);
  }
  at::Tensor record() const override {
    const Transfer* t = in_flight_->find(ticket_);
    if (!t) throw sdk::Error("saving a collective handle that is no longer in flight (its node failed since)");
    return record_of(*t);
  }

 private:
  NodeMeter& meter_;
  std::shared_ptr<TransfersInFlight> in_flight_;
  uint64_t ticket_;
  bool waited_ = false;
};

}  // namespace

int MeteredCommunicator::position(int rank) const {
  if (!live_) return rank;
  return static_cast<int>(std::lower_bound(live_->begin(), live_->end(), rank) - live_->begin());
}

MeteredCommunicator::Cost MeteredCommunicator::all_reduce_cost(const std::vector<at::Tensor>& tensors) const {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  return {CollectiveKind::AllReduce, all_reduce_traffic(bytes, K), all_reduce_total_sent(bytes, K),
          meter_.network().all_reduce_time(bytes, K)};
}

MeteredCommunicator::Cost MeteredCommunicator::broadcast_cost(const std::vector<at::Tensor>& tensors, int root) const {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  return {CollectiveKind::Broadcast, broadcast_traffic(bytes, K, position(rank()), position(root)),
          broadcast_total_sent(bytes, K), meter_.network().broadcast_time(bytes, K)};
}

MeteredCommunicator::Cost MeteredCommunicator::all_gather_cost(
    const std::vector<std::vector<at::Tensor>>& gathered) const {
  // Ranks may send different amounts; the gathered tensors say how much.
  std::vector<double> by_rank;
  by_rank.reserve(gathered.size());
  for (const auto& from_rank : gathered) by_rank.push_back(payload_bytes(from_rank));
  // Node r sends every block but its successor's: the most is sent by the
  // node whose successor has the smallest block.
  double total = 0, smallest = by_rank.empty() ? 0.0 : by_rank[0];
  for (double b : by_rank) {
    total += b;
    smallest = std::min(smallest, b);
  }
  const double max_sent = total - smallest;
  return {CollectiveKind::AllGather, all_gather_traffic(by_rank, position(rank())), all_gather_total_sent(by_rank),
          meter_.network().all_gather_time(max_sent, static_cast<int>(by_rank.size()))};
}

void MeteredCommunicator::finish(const Cost& cost) {
  meter_.after_collective(source_, cost.kind, cost.mine, cost.cluster_sent, cost.seconds);
}

std::unique_ptr<sdk::InFlight> MeteredCommunicator::start(const Cost& cost) {
  if (source_ != TrafficSource::Strategy) {
    finish(cost);
    return sdk::completed();
  }
  const uint64_t ticket = meter_.start_transfer(cost.kind, cost.mine, cost.cluster_sent, cost.seconds);
  return std::make_unique<MeteredInFlight>(meter_, ticket);
}

void MeteredCommunicator::all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  const Cost cost = all_reduce_cost(tensors);
  meter_.before_collective(source_);
  inner_.all_reduce(tensors, op);
  finish(cost);
}

sdk::SharedTensors MeteredCommunicator::all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  // The same traffic as all_reduce: a real cluster sends the same bytes,
  // only this process keeps fewer copies of the result.
  const Cost cost = all_reduce_cost(tensors);
  meter_.before_collective(source_);
  sdk::SharedTensors result = inner_.all_reduce_shared(tensors, op);
  finish(cost);
  return result;
}

void MeteredCommunicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  const Cost cost = broadcast_cost(tensors, root);
  meter_.before_collective(source_);
  inner_.broadcast(tensors, root);
  finish(cost);
}

std::vector<std::vector<at::Tensor>> MeteredCommunicator::all_gather(const std::vector<at::Tensor>& tensors) {
  meter_.before_collective(source_);
  auto gathered = inner_.all_gather(tensors);
  finish(all_gather_cost(gathered));
  return gathered;
}

void MeteredCommunicator::barrier() {
  meter_.before_collective(source_);
  inner_.barrier();
  finish({CollectiveKind::Barrier, Traffic{}, 0.0, meter_.network().barrier_time(size())});
}

sdk::Pending MeteredCommunicator::all_reduce_async(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  const Cost cost = all_reduce_cost(tensors);
  meter_.before_collective(source_);
  sdk::SharedTensors result = inner_.all_reduce_shared(tensors, op);
  return {start(cost), *result};
}

sdk::Pending MeteredCommunicator::all_gather_async(const std::vector<at::Tensor>& tensors) {
  meter_.before_collective(source_);
  auto gathered = inner_.all_gather(tensors);
  std::unique_ptr<sdk::InFlight> in_flight = start(all_gather_cost(gathered));
  std::vector<at::Tensor> flat;
  for (auto& from_rank : gathered) flat.insert(flat.end(), from_rank.begin(), from_rank.end());
  return {std::move(in_flight), std::move(flat)};
}

sdk::Pending MeteredCommunicator::all_to_all_async(const std::vector<at::Tensor>& tensors) {
  const int K = size();
  if (K <= 0 || tensors.size() % static_cast<size_t>(K) != 0) return sdk::Communicator::all_to_all_async(tensors);
  meter_.before_collective(source_);
  // The data moves as an all_gather (every node's parts reach every node of
  // the process, which costs nothing here); the cost is the all-to-all's:
  // part p of node q travels from q to p alone.
  auto gathered = inner_.all_gather(tensors);
  const size_t m = tensors.size() / static_cast<size_t>(K);
  const auto me = static_cast<size_t>(place());
  EXOGYM_CHECK_INTERNAL(gathered.size() == static_cast<size_t>(K) && me < gathered.size(),
                        "an all_to_all's all_gather returned another node count");
  auto part_bytes = [&](size_t from, size_t to) {
    const auto first = gathered[from].begin() + static_cast<std::ptrdiff_t>(to * m);
    return payload_bytes(std::vector<at::Tensor>(first, first + static_cast<std::ptrdiff_t>(m)));
  };
  Cost cost{CollectiveKind::AllToAll, Traffic{}, 0.0, 0.0};
  double max_sent = 0;
  for (size_t q = 0; q < gathered.size(); ++q) {
    double sent = 0;
    for (size_t p = 0; p < gathered.size(); ++p) {
      if (p != q) sent += part_bytes(q, p);
    }
    cost.cluster_sent += sent;
    max_sent = std::max(max_sent, sent);
    if (q == me)
      cost.mine.sent = sent;
    else
      cost.mine.received += part_bytes(q, me);
  }
  cost.seconds = meter_.network().all_gather_time(max_sent, K);
  std::vector<at::Tensor> mine;
  for (auto& from : gathered) {
    mine.insert(mine.end(), from.begin() + static_cast<std::ptrdiff_t>(me * m),
                from.begin() + static_cast<std::ptrdiff_t>((me + 1) * m));
  }
  return {start(cost), std::move(mine)};
}

std::unique_ptr<sdk::InFlight> MeteredCommunicator::resume(const at::Tensor& record) {
  // A handle that was complete when it was saved (sdk::completed).
  if (record.numel() == 0 || source_ != TrafficSource::Strategy) return sdk::completed();
  return std::make_unique<MeteredInFlight>(meter_, meter_.resume_transfer(transfer_from_record(record)));
}

void MeteredCommunicator::finish_group(const Cost& cost, size_t members) {
  // Every live node is taken to be in a group like this one: exact for a
  // partition into equal groups; summary.json's total is exact anyway.
  const double view = cost.cluster_sent * size() / static_cast<double>(members);
  meter_.after_group(source_, cost.kind, cost.mine, view, cost.seconds);
}

void MeteredCommunicator::group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors,
                                           sdk::ReduceOp op) {
  const double bytes = payload_bytes(tensors);
  const int g = static_cast<int>(members.size());
  const Cost cost{CollectiveKind::GroupAllReduce, all_reduce_traffic(bytes, g), all_reduce_total_sent(bytes, g),
                  NetworkModel::all_reduce_time(bytes, g, meter_.network().bottleneck(members))};
  meter_.before_group(source_);
  inner_.group_all_reduce(members, tensors, op);
  finish_group(cost, members.size());
}

std::vector<std::vector<at::Tensor>> MeteredCommunicator::group_all_gather(const std::vector<int>& members,
                                                                           const std::vector<at::Tensor>& tensors) {
  meter_.before_group(source_);
  auto gathered = inner_.group_all_gather(members, tensors);
  std::vector<double> by_member;
  double total = 0, smallest = 0;
  for (const auto& from : gathered) {
    by_member.push_back(payload_bytes(from));
    total += by_member.back();
    smallest = by_member.size() == 1 ? by_member.back() : std::min(smallest, by_member.back());
  }
  const int me = static_cast<int>(std::lower_bound(members.begin(), members.end(), rank()) - members.begin());
  const Cost cost{CollectiveKind::GroupAllGather, all_gather_traffic(by_member, me), all_gather_total_sent(by_member),
                  NetworkModel::all_gather_time(total - smallest, static_cast<int>(members.size()),
                                                meter_.network().bottleneck(members))};
  finish_group(cost, members.size());
  return gathered;
}

std::vector<at::Tensor> MeteredCommunicator::exchange(int peer, const std::vector<at::Tensor>& tensors) {
  meter_.before_group(source_);
  auto theirs = inner_.exchange(peer, tensors);
  const double mine = payload_bytes(tensors), other = payload_bytes(theirs);
  const Cost cost{
      CollectiveKind::Exchange, Traffic{mine, other}, mine + other,
      NetworkModel::exchange_time(std::max(mine, other),
                                  meter_.network().bottleneck({std::min(rank(), peer), std::max(rank(), peer)}))};
  finish_group(cost, 2);
  return theirs;
}

}  // namespace exogym::runtime::sim
