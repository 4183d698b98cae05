#include "exogym/runtime/sim/metered_communicator.h"

#include <algorithm>

#include "exogym/runtime/sim/payload.h"

namespace exogym::runtime::sim {

int MeteredCommunicator::position(int rank) const {
  if (!live_) return rank;
  return static_cast<int>(std::lower_bound(live_->begin(), live_->end(), rank) - live_->begin());
}

void MeteredCommunicator::metered_all_reduce(const std::vector<at::Tensor>& tensors,
                                             const std::function<void()>& reduce) {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  meter_.before_collective(source_);
  reduce();
  meter_.after_collective(source_, CollectiveKind::AllReduce, all_reduce_traffic(bytes, K),
                          all_reduce_total_sent(bytes, K), meter_.network().all_reduce_time(bytes, K));
}

void MeteredCommunicator::all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  metered_all_reduce(tensors, [&] { inner_.all_reduce(tensors, op); });
}

sdk::SharedTensors MeteredCommunicator::all_reduce_shared(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  // The same traffic as all_reduce: a real cluster sends the same bytes,
  // only this process keeps fewer copies of the result.
  sdk::SharedTensors result;
  metered_all_reduce(tensors, [&] { result = inner_.all_reduce_shared(tensors, op); });
  return result;
}

void MeteredCommunicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  meter_.before_collective(source_);
  inner_.broadcast(tensors, root);
  meter_.after_collective(source_, CollectiveKind::Broadcast,
                          broadcast_traffic(bytes, K, position(rank()), position(root)), broadcast_total_sent(bytes, K),
                          meter_.network().broadcast_time(bytes, K));
}

std::vector<std::vector<at::Tensor>> MeteredCommunicator::all_gather(const std::vector<at::Tensor>& tensors) {
  meter_.before_collective(source_);
  auto gathered = inner_.all_gather(tensors);
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
  meter_.after_collective(source_, CollectiveKind::AllGather, all_gather_traffic(by_rank, position(rank())),
                          all_gather_total_sent(by_rank),
                          meter_.network().all_gather_time(max_sent, static_cast<int>(by_rank.size())));
  return gathered;
}

void MeteredCommunicator::barrier() {
  meter_.before_collective(source_);
  inner_.barrier();
  meter_.after_collective(source_, CollectiveKind::Barrier, Traffic{}, 0.0, meter_.network().barrier_time(size()));
}

}  // namespace exogym::runtime::sim
