#include "exogym/runtime/train/meters.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "exogym/runtime/data/client_slots.h"
#include "exogym/runtime/sim/node_factors.h"
#include "exogym/runtime/sim/participation.h"

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
  if (!m.participation) return std::nullopt;
  const sim::ParticipationSpec& p = *m.participation;
  if (!m.has_population()) {
    return async::AsyncRefusal{"participation",
                               "an asynchronous strategy has no partial participation among its nodes: every node "
                               "works at its own pace (with a population, participation.clients above the nodes, "
                               "the nodes are the clients training at once)"};
  }
  const int at_once = sim::participants(p, *p.clients);
  if (at_once != m.nodes) {
    return async::AsyncRefusal{
        p.per_round ? "participation.per_round" : "participation.fraction",
        std::to_string(at_once) + " clients at once, but the run has " + std::to_string(m.nodes) +
            " nodes: under an asynchronous strategy every node trains a client at all times (give per_round " +
            std::to_string(m.nodes) + ")"};
  }
  if (p.trace) {
    return async::AsyncRefusal{"participation.trace",
                               "an asynchronous strategy does not follow an availability trace: its nodes take on "
                               "clients at any time, not at rounds"};
  }
  if (m.compute.speed_distribution && m.compute.speed_distribution->kind == sim::FactorDistribution::Kind::LogNormal &&
      *p.clients > sim::kMaxLogNormalScan) {
    return async::AsyncRefusal{"compute.speed_distribution",
                               "an asynchronous strategy's slots follow the fastest client, which a lognormal over " +
                                   std::to_string(*p.clients) + " clients leaves to a scan of each (at most " +
                                   std::to_string(sim::kMaxLogNormalScan) + "): give \"uniform\" or \"tiers\""};
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
      clients_(m.has_population() ? *m.participation->clients : 0),
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
      speed = client_speed(client);
      bandwidth = client_bandwidth(client);
    }
    compute_.speed[r] = state.speed.value_or(speed);
    network_.set_bandwidth(rank, state.bandwidth.value_or(bandwidth));
  }
  network_.pace_by(live);
}

double Meters::client_speed(int client) const {
  return speed_distribution_ ? sim::draw_factor(*speed_distribution_, sim::NodeFactor::Speed, seed_, client) : 1;
}

double Meters::client_bandwidth(int client) const {
  return bandwidth_ * (bandwidth_distribution_
                           ? sim::draw_factor(*bandwidth_distribution_, sim::NodeFactor::Bandwidth, seed_, client)
                           : 1);
}

void Meters::start_async_population(data::ClientSlots& slots, bool resumed) {
  async::AsyncSchedule::Population population;
  population.clients = clients_;
  population.seed = seed_;
  population.fastest_speed =
      speed_distribution_ ? sim::largest_factor(*speed_distribution_, sim::NodeFactor::Speed, seed_, clients_) : 1;
  // Between slots, while every node waits: the node trains the client's
  // data (PopulationSampler reads the slots) at its speed, over its link.
  population.take = [this, &slots](int rank, int client) {
    slots.assign(rank, client);
    const double speed = client_speed(client);
    compute_.speed[static_cast<size_t>(rank)] = speed;
    network_.set_bandwidth(rank, client_bandwidth(client));
    return speed;
  };
  const std::vector<int> current = slots.clients();
  async_->use_population(std::move(population), resumed ? &current : nullptr);
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
