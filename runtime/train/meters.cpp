#include "exogym/runtime/train/meters.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace exogym::runtime::train {

namespace {

sim::ComputeModel compute_model(const manifest::Manifest& m) {
  sim::ComputeModel compute;
  compute.step_time = m.compute.step_time;
  compute.speed.assign(m.nodes, 1.0);
  for (const auto& [rank, speed] : m.compute.speed) compute.speed[rank] = speed;
  return compute;
}

// What rules out an asynchronous strategy in this run (sdk/async.h).
std::optional<async::AsyncRefusal> async_refusal(const manifest::Manifest& m) {
  if (m.participation) {
    return async::AsyncRefusal{
        "participation", "an asynchronous strategy has no partial participation: every node works at its own pace"};
  }
  return std::nullopt;
}

}  // namespace

Meters::Meters(const manifest::Manifest& m, const dist::NodeBlock& block)
    : block_(block),
      network_(m.nodes, m.network.link, m.network.per_node),
      compute_(compute_model(m)),
      clocks_(m.nodes),
      meters_(m.nodes),
      manifest_speed_(compute_.speed),
      speed_distribution_(m.compute.speed_distribution),
      bandwidth_distribution_(m.network.bandwidth_distribution),
      bandwidth_(m.network.link.bandwidth),
      seed_(m.seed),
      heterogeneous_speed_(!m.compute.speed.empty() || (m.participation && m.participation->trace)),
      heterogeneous_links_(!m.network.per_node.empty() || (m.participation && m.participation->trace) ||
                           m.network.bandwidth_distribution) {
  speeds_vary_ = heterogeneous_speed_ || speed_distribution_.has_value();
  for (int rank = 0; rank < m.nodes; ++rank) manifest_links_.push_back(network_.link(rank));
  // comm.csv needs one node's rows: every node sees every collective's
  // totals. With failures, the reporting node changes: every node keeps its
  // rows, and those not reporting drop them (node_loop.cpp).
  for (int rank = block.first; rank < block.first + block.count; ++rank) {
    meters_[rank] =
        std::make_unique<sim::NodeMeter>(rank, network_, compute_, clocks_, rank == 0 || m.varies_membership());
  }
  async_ =
      std::make_unique<async::AsyncSchedule>(compute_.step_time, compute_.speed, network_, async_refusal(m), block);
}

void Meters::apply_clients(const std::vector<int>* client_of_node, const sim::AvailabilityTrace* trace, double time,
                           const std::vector<int>& live) {
  for (int rank = 0; rank < network_.nodes(); ++rank) {
    const auto r = static_cast<size_t>(rank);
    const int client = client_of_node ? (*client_of_node)[r] : rank;
    const sim::ClientState state = trace ? trace->at(client, time) : sim::ClientState{};
    double speed = manifest_speed_[r], bandwidth = manifest_links_[r].bandwidth;
    if (client_of_node) {
      speed = speed_distribution_ ? sim::draw_factor(*speed_distribution_, sim::NodeFactor::Speed, seed_, client) : 1;
      bandwidth = bandwidth_ * (bandwidth_distribution_ ? sim::draw_factor(*bandwidth_distribution_,
                                                                           sim::NodeFactor::Bandwidth, seed_, client)
                                                        : 1);
    }
    compute_.speed[r] = state.speed.value_or(speed);
    network_.set_bandwidth(rank, state.bandwidth.value_or(bandwidth));
  }
  network_.pace_by(live);
}

double Meters::fastest_speed(const std::vector<int>& live) const {
  if (!speeds_vary_) return 1.0;
  double fastest = 0;
  for (int rank : live) fastest = std::max(fastest, speed(rank));
  return fastest > 0 ? fastest : 1.0;
}

nlohmann::json Meters::node_stats() const {
  nlohmann::json stats = nlohmann::json::array();
  for (int rank = block_.first; rank < block_.first + block_.count; ++rank) {
    const sim::NodeMeter& meter = *meters_[rank];
    const sim::Traffic& mine = meter.traffic(sim::TrafficSource::Strategy);
    stats.push_back({{"node", meter.rank()},
                     {"bytes_sent", mine.sent},
                     {"bytes_received", mine.received},
                     {"peak_step_bytes_sent", meter.peak_step_sent()},
                     {"runtime_bytes_sent", meter.traffic(sim::TrafficSource::Runtime).sent},
                     {"time_s", meter.clock()},
                     {"compute_s", meter.compute_seconds()},
                     {"communication_s", meter.communication_seconds()},
                     {"waiting_s", meter.waiting_seconds()},
                     {"hidden_s", meter.hidden_seconds()}});
    // Only with subgroups: the exact total of summary.json adds these up.
    if (meter.group_sent() > 0) stats.back()["group_bytes_sent"] = meter.group_sent();
    // Only where nodes differ: what each was given (drawn ones included,
    // docs/simulation.md#heterogeneous-nodes).
    if (heterogeneous_speed_) stats.back()["speed"] = compute_.speed[static_cast<size_t>(rank)];
    if (heterogeneous_links_) {
      const sim::Link link = network_.link(rank);
      stats.back()["bandwidth_bytes_per_s"] = link.bandwidth;
      stats.back()["latency_s"] = link.latency;
    }
  }
  return stats;
}

}  // namespace exogym::runtime::train
