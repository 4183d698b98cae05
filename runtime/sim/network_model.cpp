#include "exogym/runtime/sim/network_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

const char* to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::Barrier:
      return "barrier";
    case CollectiveKind::GroupAllReduce:
      return "group_all_reduce";
    case CollectiveKind::GroupAllGather:
      return "group_all_gather";
    case CollectiveKind::Exchange:
      return "exchange";
    case CollectiveKind::ServerUpdate:
      return "server_update";
    case CollectiveKind::ServerReply:
      return "server_reply";
    case CollectiveKind::AllToAll:
      return "all_to_all";
  }
  return "?";
}

Traffic all_reduce_traffic(double bytes, int nodes) {
  if (nodes <= 1) return {};
  const double each = 2.0 * (nodes - 1) * bytes / nodes;
  return {each, each};
}

Traffic broadcast_traffic(double bytes, int nodes, int rank, int root) {
  if (nodes <= 1) return {};
  const int position = ((rank - root) % nodes + nodes) % nodes;  // 0 = root, K-1 = end of the chain
  return {position < nodes - 1 ? bytes : 0.0, position > 0 ? bytes : 0.0};
}

Traffic all_gather_traffic(const std::vector<double>& bytes_by_rank, int rank) {
  const int nodes = static_cast<int>(bytes_by_rank.size());
  if (nodes <= 1) return {};
  const double total = std::accumulate(bytes_by_rank.begin(), bytes_by_rank.end(), 0.0);
  return {total - bytes_by_rank[(rank + 1) % nodes], total - bytes_by_rank[rank]};
}

double all_reduce_total_sent(double bytes, int nodes) { return nodes <= 1 ? 0.0 : 2.0 * (nodes - 1) * bytes; }

double broadcast_total_sent(double bytes, int nodes) { return nodes <= 1 ? 0.0 : (nodes - 1) * bytes; }

double all_gather_total_sent(const std::vector<double>& bytes_by_rank) {
  const double nodes = static_cast<double>(bytes_by_rank.size());
  if (nodes <= 1) return 0.0;
  return (nodes - 1) * std::accumulate(bytes_by_rank.begin(), bytes_by_rank.end(), 0.0);
}

NetworkModel::NetworkModel(int nodes, Link link, std::map<int, Link> overrides)
    : nodes_(nodes), link_(link), overrides_(std::move(overrides)), bottleneck_(link) {
  EXOGYM_CHECK_INTERNAL(!(nodes < 1 || !(link.bandwidth > 0) || link.latency < 0), "NetworkModel: bad link");
  for (const auto& [rank, l] : overrides_) {
    if (rank < 0 || rank >= nodes) continue;
    bottleneck_.bandwidth = std::min(bottleneck_.bandwidth, l.bandwidth);
    bottleneck_.latency = std::max(bottleneck_.latency, l.latency);
  }
}

Link NetworkModel::link(int rank) const {
  auto it = overrides_.find(rank);
  return it == overrides_.end() ? link_ : it->second;
}

void NetworkModel::set_bandwidth(int rank, double bandwidth) {
  Link l = link(rank);
  l.bandwidth = bandwidth;
  overrides_[rank] = l;
}

Link NetworkModel::bottleneck(const std::vector<int>& ranks) const {
  Link worst = link(ranks.empty() ? 0 : ranks[0]);
  for (int r : ranks) {
    const Link l = link(r);
    worst.bandwidth = std::min(worst.bandwidth, l.bandwidth);
    worst.latency = std::max(worst.latency, l.latency);
  }
  return worst;
}

double NetworkModel::all_reduce_time(double bytes, int nodes) const {
  return all_reduce_time(bytes, nodes, bottleneck_);
}

double NetworkModel::all_reduce_time(double bytes, int nodes, const Link& link) {
  if (nodes <= 1) return 0.0;
  const double steps = 2.0 * (nodes - 1);
  return steps * (link.latency + bytes / nodes / link.bandwidth);
}

double NetworkModel::all_gather_time(double max_sent, int nodes, const Link& link) {
  if (nodes <= 1) return 0.0;
  return (nodes - 1) * link.latency + max_sent / link.bandwidth;
}

double NetworkModel::exchange_time(double larger_bytes, const Link& link) {
  return link.latency + larger_bytes / link.bandwidth;
}

double NetworkModel::broadcast_time(double bytes, int nodes) const {
  if (nodes <= 1) return 0.0;
  return (nodes - 1) * bottleneck_.latency + bytes / bottleneck_.bandwidth;
}

double NetworkModel::all_gather_time(double max_sent, int nodes) const {
  return all_gather_time(max_sent, nodes, bottleneck_);
}

double NetworkModel::barrier_time(int nodes) const {
  if (nodes <= 1) return 0.0;
  return std::ceil(std::log2(static_cast<double>(nodes))) * bottleneck_.latency;
}

}  // namespace exogym::runtime::sim
