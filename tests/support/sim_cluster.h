#pragma once
// K nodes' meters over one simulated network with a fixed step time, and
// their metered strategy communicators on node threads: the runtime's
// accounting and clock without a run (runtime/sim/node_meter.h,
// runtime/sim/metered_communicator.h).
#include <functional>
#include <memory>
#include <vector>

#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "helpers.h"

namespace exogym::test {

// The network and step time most of these tests take: 100 Mbit/s, 10 ms of
// latency, 100 ms of compute per step.
inline const runtime::sim::Link k100Mbit{1e8 / 8, 0.010};
inline constexpr double kStep = 0.1;

struct SimCluster {
  SimCluster(int nodes, runtime::sim::Link link, double step_time, std::vector<double> speed = {})
      : K(nodes), network(nodes, link), clocks(nodes) {
    compute.step_time = step_time;
    compute.speed = speed.empty() ? std::vector<double>(static_cast<size_t>(nodes), 1.0) : speed;
    for (int r = 0; r < K; ++r)
      meters.push_back(std::make_unique<runtime::sim::NodeMeter>(r, network, compute, clocks, true));
  }
  void run(const std::function<void(int, sdk::Communicator&, runtime::sim::NodeMeter&)>& body) {
    run_nodes(K, K, [&](int rank, sdk::Communicator& inner) {
      runtime::sim::MeteredCommunicator comm(inner, *meters[rank], runtime::sim::TrafficSource::Strategy);
      body(rank, comm, *meters[rank]);
    });
  }
  const int K;
  runtime::sim::NetworkModel network;
  runtime::sim::ComputeModel compute;
  runtime::sim::ClockExchange clocks;
  std::vector<std::unique_ptr<runtime::sim::NodeMeter>> meters;
};

}  // namespace exogym::test
