#pragma once
// The simulated cluster a run is measured on (sim/): its network and compute
// models, the clocks its nodes share, one meter per node of this process,
// and the slots of an asynchronous strategy. The meters refer to the rest,
// so a Meters stays where it is built.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "exogym/runtime/async/async_schedule.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/availability_trace.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/compute_model.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"

namespace exogym::runtime::data {
class ClientSlots;
}

namespace exogym::runtime::train {

class Meters {
 public:
  Meters(const manifest::Manifest& m, const dist::NodeBlock& block);
  Meters(const Meters&) = delete;
  Meters& operator=(const Meters&) = delete;

  const sim::NetworkModel& network() const { return network_; }
  sim::ClockExchange& clocks() { return clocks_; }
  // This process's nodes.
  const dist::NodeBlock& block() const { return block_; }
  bool hosts(int rank) const { return block_.contains(rank); }
  // Node `rank`'s meter; `rank` must be one of this process's nodes.
  sim::NodeMeter& meter(int rank) { return *meters_[rank]; }
  const sim::NodeMeter& meter(int rank) const { return *meters_[rank]; }
  // meter() as a function, for sim/ (the asynchronous schedule).
  std::function<sim::NodeMeter&(int)> meter_of() {
    return [this](int rank) -> sim::NodeMeter& { return *meters_[rank]; };
  }

  // The time of an asynchronous strategy (sdk/async.h), if it connects.
  async::AsyncSchedule& async() { return *async_; }
  // Each node's speed and bandwidth for a round, and the collectives paced
  // by the slowest link of `live`; called between steps while every node
  // waits (train/membership.h). `client_of_node` (a population; null: node
  // r is client r): the client each node trains, whose own draws from
  // compute.speed_distribution and network.bandwidth_distribution it takes.
  // `trace` (or null): its speeds and bandwidths at simulated time `time`
  // replace those where it gives them.
  void apply_clients(const std::vector<int>* client_of_node, const sim::AvailabilityTrace* trace, double time,
                     const std::vector<int>& live);

  // An asynchronous strategy over a population (async_schedule.h), at the
  // first meeting while every node waits: from now on the schedule hands
  // the nodes their clients, each with its speed and bandwidth, starting
  // from `slots`' clients when `resumed`.
  void start_async_population(data::ClientSlots& slots, bool resumed);

  // Node `rank`'s speed factor this round (any rank), and the fastest of
  // `live`'s (NodeContext::speed, fastest_speed; read by every node at every
  // step, so 1 without a look where no speed can differ).
  double speed(int rank) const { return compute_.speed[static_cast<size_t>(rank)]; }
  double fastest_speed(const std::vector<int>& live) const;

  // This process's nodes' counters and clock splits, for summary.json.
  nlohmann::json node_stats() const;

 private:
  // A population's client `client`'s own draws (as node `client` would get).
  double client_speed(int client) const;
  double client_bandwidth(int client) const;

  dist::NodeBlock block_;
  sim::NetworkModel network_;
  sim::ComputeModel compute_;
  sim::ClockExchange clocks_;
  std::vector<std::unique_ptr<sim::NodeMeter>> meters_;  // by global rank
  std::unique_ptr<async::AsyncSchedule> async_;
  // The manifest's speeds and links, which a trace's empty fields keep.
  std::vector<double> manifest_speed_;
  std::vector<sim::Link> manifest_links_;
  // A population's clients draw their factors as the nodes do.
  std::optional<sim::FactorDistribution> speed_distribution_, bandwidth_distribution_;
  double bandwidth_ = 0;  // network.bandwidth
  uint64_t seed_ = 0;
  int clients_ = 0;  // participation.clients; 0 without
  // Whether the manifest gives nodes their own speeds or links.
  bool heterogeneous_speed_ = false, heterogeneous_links_ = false;
  // Whether any node's speed can differ from 1 (a listed speed, a
  // distribution, a trace).
  bool speeds_vary_ = false;
};

}  // namespace exogym::runtime::train
