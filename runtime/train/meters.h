#pragma once
// The simulated cluster a run is measured on (sim/): its network and compute
// models, the clocks its nodes share, and one meter per node of this
// process. The meters refer to the rest, so a Meters stays where it is
// built.
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/availability_trace.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/compute_model.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"

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

  // An availability trace's speeds and bandwidths at simulated time `time`
  // for every node (the manifest's where the trace leaves them empty), and
  // the collectives paced by the slowest link of `live`. Called between
  // steps while every node waits (train/membership.h).
  void apply_trace(const sim::AvailabilityTrace& trace, double time, const std::vector<int>& live);

  // This process's nodes' counters and clock splits, for summary.json.
  nlohmann::json node_stats() const;

 private:
  dist::NodeBlock block_;
  sim::NetworkModel network_;
  sim::ComputeModel compute_;
  sim::ClockExchange clocks_;
  std::vector<std::unique_ptr<sim::NodeMeter>> meters_;  // by global rank
  // The manifest's speeds and links, which a trace's empty fields keep.
  std::vector<double> manifest_speed_;
  std::vector<sim::Link> manifest_links_;
  // Whether the manifest gives nodes their own speeds or links.
  bool heterogeneous_speed_ = false, heterogeneous_links_ = false;
};

}  // namespace exogym::runtime::train
