#include "exogym/runtime/comm/group_work.h"

#include <algorithm>
#include <limits>

#include "exogym/runtime/comm/reduction.h"
#include "exogym/runtime/sim/clock_exchange.h"

namespace exogym::runtime::comm {

void complete_group(const std::vector<CollectiveCall*>& local,
                    const std::vector<const std::vector<at::Tensor>*>& parts) {
  const CollectiveCall& first = *local.front();
  if (first.kind == CallKind::AllReduce) {
    for (size_t i = 0; i < first.tensors.size(); ++i) {
      at::Tensor acc = (*parts[0])[i].clone();
      for (size_t j = 1; j < parts.size(); ++j) combine(acc, (*parts[j])[i].to(acc.device()), first.op);
      if (first.op == sdk::ReduceOp::Avg) average_sum(acc, static_cast<int64_t>(parts.size()));
      for (CollectiveCall* call : local) call->tensors[i].copy_(acc);
    }
    return;
  }
  for (CollectiveCall* call : local) {
    call->gathered->assign(parts.size(), {});
    for (size_t j = 0; j < parts.size(); ++j) {
      for (size_t i = 0; i < parts[j]->size(); ++i) {
        const at::Tensor& t = (*parts[j])[i];
        // Fresh tensors on the node's device (what another process sent is in host memory).
        const auto device = i < call->tensors.size() ? call->tensors[i].device() : t.device();
        (*call->gathered)[j].push_back(t.to(t.options().device(device), /*non_blocking=*/false, /*copy=*/true));
      }
    }
  }
}

double latest_group_arrival(sim::ClockExchange* clocks, const std::vector<int>& local_ranks) {
  double latest = -std::numeric_limits<double>::infinity();
  if (clocks) {
    for (int r : local_ranks) latest = std::max(latest, clocks->group_arrival(r));
  }
  return latest;
}

void share_group_arrival(sim::ClockExchange* clocks, const std::vector<int>& local_ranks, double remote) {
  if (!clocks) return;
  const double latest = std::max(remote, latest_group_arrival(clocks, local_ranks));
  for (int r : local_ranks) clocks->set_group_latest(r, latest);
}

}  // namespace exogym::runtime::comm
