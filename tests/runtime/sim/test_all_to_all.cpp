// all_to_all_async and a node's place among the live nodes (sdk/comm.h),
// through the metered communicator (runtime/sim/metered_communicator.h):
// parts to their nodes, metered part by part; the low-bit reduce-scatter
// that uses them (sdk/quantized_comm.h) in flight on the simulated clock,
// saved and resumed.
#include <ATen/ATen.h>

#include <vector>

#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/quantized_comm.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "sim_cluster.h"
#include "testing.h"

namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::k100Mbit;
using exogym::test::kStep;
using exogym::test::run_nodes;
using exogym::test::SimCluster;
using nlohmann::json;

TEST_CASE("all_to_all_async: part p of every node reaches node p, in place order, metered part by part",
          "[collectives][accounting]") {
  const int K = 3;
  const sim::NetworkModel network(K, sim::Link{1e6, 0.0});
  const sim::ComputeModel compute{0.0, {}};
  sim::ClockExchange clocks(K);
  std::vector<std::vector<at::Tensor>> plain(K), metered_result(K);
  std::vector<sim::Traffic> traffic(K);
  std::vector<double> cluster(K), seconds(K);
  // Node q's part for p: (q + 1) * (p + 1) floats holding 10 q + p.
  auto parts = [](int q) {
    std::vector<at::Tensor> out;
    for (int p = 0; p < K; ++p) out.push_back(at::full({(q + 1) * (p + 1)}, 10.0 * q + p));
    return out;
  };
  run_nodes(K, 3, [&](int rank, sdk::Communicator& comm) {
    LOCKED(CHECK(comm.place() == rank));
    plain[rank] = comm.all_to_all_async(parts(rank)).wait();
    sim::NodeMeter meter(rank, network, compute, clocks);
    sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
    metered_result[rank] = metered.all_to_all_async(parts(rank)).wait();
    traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    cluster[rank] = meter.cluster_sent(sim::TrafficSource::Strategy);
    seconds[rank] = meter.clock();
    LOCKED(CHECK_THROWS_WITH(comm.all_to_all_async({at::zeros({1})}), Catch::Contains("are not 3 equal parts")));
  });
  for (int p = 0; p < K; ++p) {
    INFO("node " << p);
    REQUIRE(plain[p].size() == static_cast<size_t>(K));
    for (int q = 0; q < K; ++q) {
      CHECK(at::equal(plain[p][q], at::full({(q + 1) * (p + 1)}, 10.0 * q + p)));
      CHECK(at::equal(metered_result[p][q], plain[p][q]));
    }
    // 4 bytes a float: node p sends (p + 1) * Σ_{d != p} (d + 1) floats,
    // receives (p + 1) * Σ_{q != p} (q + 1).
    const double others = 6 - (p + 1);
    CHECK(traffic[p].sent == 4 * (p + 1) * others);
    CHECK(traffic[p].received == 4 * (p + 1) * others);
    CHECK(cluster[p] == 4 * (1 * 5 + 2 * 4 + 3 * 3));
    // (K - 1) latencies (none here) + the most any node sends / bandwidth.
    CHECK(seconds[p] == Approx(4.0 * 3 * 3 / 1e6));
  }
}

TEST_CASE(
    "a low-bit reduce-scatter in flight: its all_to_all and all_gather take the link one after the other, and both "
    "resume from a checkpoint",
    "[overlap][checkpoint][quantize]") {
  SimCluster cluster(2, k100Mbit, kStep);
  json meter_state;
  sdk::StateDict saved;
  double finish = 0;
  std::vector<at::Tensor> mean;
  const at::Tensor values = at::linspace(-1, 1, 100000);
  cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
    LOCKED(CHECK(comm.place() == rank));
    meter.begin_step(0);
    auto pending = sdk::quantized_mean_async(comm, {sdk::quantize(values * (rank + 1), sdk::QuantFormat::Fp4E2M1)});
    meter.end_step();
    if (rank == 0) {
      meter_state = meter.state();
      pending.save(saved, "p.");
    }
    meter.begin_step(1);
    auto result = pending.wait();
    meter.end_step();
    if (rank == 0) {
      finish = meter.clock();
      mean = result;
    }
  });
  REQUIRE(meter_state["in_flight"].size() == 2);
  CHECK(meter_state["in_flight"][0]["kind"] == "all_to_all");
  CHECK(meter_state["in_flight"][1]["kind"] == "all_gather");
  // One after the other on the link: the all_gather begins where the all_to_all ends.
  CHECK(meter_state["in_flight"][1]["begin"].get<double>() == meter_state["in_flight"][0]["finish"].get<double>());
  CHECK(saved.count("p.work.before") == 1);
  SimCluster resumed(2, k100Mbit, kStep);
  sim::NodeMeter& meter = *resumed.meters[0];
  meter.restore(meter_state);
  std::vector<at::Tensor> back;
  run_nodes(1, 1, [&](int, sdk::Communicator& inner) {
    sim::MeteredCommunicator comm(inner, meter, sim::TrafficSource::Strategy);
    auto pending = sdk::Pending::load(saved, "p.", comm);
    meter.begin_step(1);
    back = pending.wait();
    meter.end_step();
  });
  REQUIRE(back.size() == 1);
  CHECK(at::equal(back[0], mean[0]));
  CHECK(meter.clock() == finish);
}

TEST_CASE("a metered communicator's place is its index among the live ranks", "[overlap][faults]") {
  SimCluster cluster(4, k100Mbit, kStep);
  const std::vector<int> live = {0, 2, 3};
  std::vector<int> places(3, -1);
  run_nodes(3, 3, [&](int index, sdk::Communicator& inner) {
    // Ranks 0, 2 and 3 of 4, node 1 down: places 0, 1 and 2.
    struct Renamed final : sdk::Communicator {
      Renamed(sdk::Communicator& c, int rank_of) : inner(c), r(rank_of) {}
      int rank() const override { return r; }
      int size() const override { return inner.size(); }
      void all_reduce(std::vector<at::Tensor>& t, sdk::ReduceOp op) override { inner.all_reduce(t, op); }
      void broadcast(std::vector<at::Tensor>& t, int root) override { inner.broadcast(t, root); }
      std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& t) override {
        return inner.all_gather(t);
      }
      void barrier() override { inner.barrier(); }
      sdk::Communicator& inner;
      int r;
    } renamed(inner, live[static_cast<size_t>(index)]);
    sim::MeteredCommunicator comm(renamed, *cluster.meters[static_cast<size_t>(live[index])],
                                  sim::TrafficSource::Strategy, &live);
    places[static_cast<size_t>(index)] = comm.place();
  });
  CHECK(places == std::vector<int>{0, 1, 2});
}
