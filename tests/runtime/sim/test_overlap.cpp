// Non-blocking collectives (sdk/pending.h) on the simulated clock: the same
// bits and bytes as the blocking calls, transfers that overlap compute in
// closed form (node_meter.h), the link shared one transfer after another,
// the errors for handles not waited for, aborts, and handles in flight
// across a checkpoint.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/pending.h"
#include "helpers.h"
#include "sim_cluster.h"
#include "testing.h"

namespace fs = std::filesystem;
namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::k100Mbit;
using exogym::test::kStep;
using exogym::test::read_text;
using exogym::test::run_nodes;
using exogym::test::SimCluster;
using exogym::test::summary_of;
using exogym::test::TempDir;
using nlohmann::json;

namespace {

constexpr int64_t kFloats = 1000000;                  // 4 MB of float32
constexpr double kBytes = 4.0 * kFloats;              // per node
const at::Tensor kPayload = at::ones({kFloats}) / 3;  // the values do not matter to the clock

std::vector<at::Tensor> rank_tensors(int rank) {
  return {at::linspace(-1, 1, 35).reshape({5, 7}) * (rank + 1.3), at::arange(6, at::kDouble) / (rank + 3)};
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

bool same_tensors(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

// Every collective once, blocking or started and waited for at once.
void every_collective(int rank, sdk::Communicator& comm, bool async, std::vector<std::vector<at::Tensor>>& results) {
  const auto x = rank_tensors(rank);
  auto reduced = clones(x), broadcast = clones(x);
  if (async) {
    results.push_back(comm.all_reduce_async(x, sdk::ReduceOp::Avg).wait());
    results.push_back(comm.all_reduce_async(x, sdk::ReduceOp::Max).wait());
    // all_gather_async's list holds every rank's tensors, rank by rank.
    const auto gathered = comm.all_gather_async(x).wait();
    for (size_t r = 0; r * x.size() < gathered.size(); ++r)
      results.emplace_back(gathered.begin() + r * x.size(), gathered.begin() + (r + 1) * x.size());
  } else {
    comm.all_reduce(reduced, sdk::ReduceOp::Avg);
    results.push_back(reduced);
    results.push_back(*comm.all_reduce_shared(x, sdk::ReduceOp::Max));
    for (auto& from_rank : comm.all_gather(x)) results.push_back(from_rank);
  }
  // Broadcast has no non-blocking form: blocking in both, in the same place
  // in the order of collectives.
  comm.broadcast(broadcast, 1);
  results.push_back(broadcast);
}

}  // namespace

TEST_CASE("non-blocking collectives waited for at once give the blocking calls' bits, bytes, rows and clocks",
          "[overlap]") {
  const int K = 3;
  SimCluster blocking(K, k100Mbit, kStep), async(K, k100Mbit, kStep);
  std::vector<std::vector<std::vector<at::Tensor>>> expected(K), actual(K);
  for (bool is_async : {false, true}) {
    SimCluster& cluster = is_async ? async : blocking;
    cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
      meter.begin_step(0);
      every_collective(rank, comm, is_async, is_async ? actual[rank] : expected[rank]);
      meter.end_step();
    });
  }
  for (int r = 0; r < K; ++r) {
    REQUIRE(expected[r].size() == actual[r].size());
    for (size_t i = 0; i < expected[r].size(); ++i) CHECK(same_tensors(expected[r][i], actual[r][i]));
    const sim::NodeMeter &b = *blocking.meters[r], &a = *async.meters[r];
    CHECK(a.traffic(sim::TrafficSource::Strategy).sent == b.traffic(sim::TrafficSource::Strategy).sent);
    CHECK(a.traffic(sim::TrafficSource::Strategy).received == b.traffic(sim::TrafficSource::Strategy).received);
    CHECK(a.traffic(sim::TrafficSource::Strategy).sent > 0);
    CHECK(a.cluster_sent(sim::TrafficSource::Strategy) == b.cluster_sent(sim::TrafficSource::Strategy));
    CHECK(a.collectives(sim::TrafficSource::Strategy) == 4);
    CHECK(a.clock() == b.clock());
    CHECK(a.hidden_seconds() == Approx(0).margin(1e-12));
  }
  const auto rows_b = blocking.meters[0]->take_rows(), rows_a = async.meters[0]->take_rows();
  REQUIRE(rows_a.size() == 3);  // all_reduce (twice), all_gather, broadcast
  REQUIRE(rows_a.size() == rows_b.size());
  for (size_t i = 0; i < rows_a.size(); ++i) {
    CHECK(rows_a[i].kind == rows_b[i].kind);
    CHECK(rows_a[i].calls == rows_b[i].calls);
    CHECK(rows_a[i].bytes_sent == rows_b[i].bytes_sent);
    CHECK(rows_a[i].time_s == rows_b[i].time_s);
  }
}

TEST_CASE("a transfer started k steps before its wait is hidden, or partly hidden, in closed form", "[overlap]") {
  // Two nodes, 4 MB at 100 Mbit/s and 10 ms: T = 2 (10 ms + 4 MB / (2 x
  // 12.5 MB/s)) = 340 ms, against 100 ms of compute per step. Started after
  // step 0's compute (at 0.1 s), it ends at 0.44 s.
  const int64_t k = GENERATE(1, 2, 3, 4, 6);
  SimCluster cluster(2, k100Mbit, kStep);
  const double T = cluster.network.all_reduce_time(kBytes, 2);
  CHECK(T == Approx(0.34));
  std::vector<double> at_start(2);
  std::vector<at::Tensor> results(2);
  cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
    meter.begin_step(0);
    auto pending = comm.all_reduce_async({kPayload.clone()}, sdk::ReduceOp::Avg);
    meter.end_step();
    at_start[rank] = meter.clock();
    for (int64_t s = 1; s <= k; ++s) {
      meter.begin_step(s);
      if (s == k) results[rank] = pending.wait().at(0);
      meter.end_step();
    }
  });
  CHECK(at_start == std::vector<double>{kStep, kStep});  // the start moved no clock
  for (const auto& result : results) CHECK(at::equal(result, kPayload));
  // The clock as the meter adds it up: k + 1 steps of compute, then the
  // jump to the transfer's end if that is later.
  double compute = 0;
  for (int64_t s = 0; s <= k; ++s) compute += kStep;
  const double finish = kStep + T;
  for (const auto& meter : cluster.meters) {
    INFO("k = " << k);
    CHECK(meter->clock() == std::max(compute, finish));
    CHECK(meter->compute_seconds() == compute);
    CHECK(meter->communication_seconds() == Approx(std::max(0.0, finish - compute)).margin(1e-12));
    CHECK(meter->hidden_seconds() == Approx(std::min(T, compute - kStep)).margin(1e-12));
    CHECK(meter->waiting_seconds() == Approx(0).margin(1e-12));
  }
  if (k == 1) CHECK(cluster.meters[0]->clock() == Approx(0.44));  // 240 ms of the 340 still to wait
  if (k == 4) CHECK(cluster.meters[0]->clock() == Approx(0.5));   // hidden: compute alone
}

TEST_CASE("with an infinitely fast network, overlapped or not, the clocks are the compute alone", "[overlap]") {
  const sim::Link instant{1e300, 0.0};
  SimCluster cluster(2, instant, kStep);
  cluster.run([&](int, sdk::Communicator& comm, sim::NodeMeter& meter) {
    for (int64_t s = 0; s < 4; ++s) {
      meter.begin_step(s);
      auto pending = comm.all_reduce_async({kPayload.clone()});
      std::vector<at::Tensor> blocking{kPayload.clone()};
      comm.all_reduce(blocking);
      pending.wait();
      meter.end_step();
    }
  });
  for (const auto& meter : cluster.meters) {
    CHECK(meter->clock() == meter->compute_seconds());
    CHECK(meter->clock() == Approx(0.4));
  }
}

TEST_CASE("a node's transfers take its link one after another, blocking ones queue behind them", "[overlap]") {
  SimCluster cluster(2, k100Mbit, kStep);
  const double T = cluster.network.all_reduce_time(kBytes, 2);
  // Per node: the clock after waiting for the second, then the first;
  // communication and hidden time then; the clock before the third
  // transfer, after a blocking all-reduce behind it, after its wait.
  std::vector<std::vector<double>> seen(2);
  cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
    auto& mine = seen[rank];
    meter.begin_step(0);
    auto first = comm.all_reduce_async({kPayload.clone()});
    auto second = comm.all_reduce_async({kPayload.clone()});
    meter.end_step();
    meter.begin_step(1);
    second.wait();
    mine.push_back(meter.clock());
    first.wait();
    mine.insert(mine.end(), {meter.clock(), meter.communication_seconds(), meter.hidden_seconds()});
    mine.push_back(meter.clock());
    auto third = comm.all_reduce_async({kPayload.clone()});
    std::vector<at::Tensor> now{kPayload.clone()};
    comm.all_reduce(now);
    mine.push_back(meter.clock());
    third.wait();
    mine.push_back(meter.clock());
    meter.end_step();
  });
  for (const auto& mine : seen) {
    REQUIRE(mine.size() == 7);
    CHECK(mine[0] == (kStep + T) + T);  // the second began when the first ended
    CHECK(mine[1] == mine[0]);          // the first was over: no move
    // 0.2 s of compute hid 0.1 s of the first transfer; the rest shows.
    CHECK(mine[2] == Approx(2 * T - 0.1));
    CHECK(mine[3] == Approx(0.1));
    CHECK(mine[5] == (mine[4] + T) + T);  // the blocking one waited for the third
    CHECK(mine[6] == mine[5]);
  }
}

TEST_CASE("a non-blocking collective starts when the last node calls it", "[overlap]") {
  // Node 1 computes at a quarter speed: 0.4 s a step. Node 0 starts at 0.1 s
  // and waits at 0.2 s: it waits 0.2 s for node 1, then the whole transfer.
  SimCluster cluster(2, k100Mbit, kStep, {1.0, 0.25});
  const double T = cluster.network.all_reduce_time(kBytes, 2);
  cluster.run([&](int, sdk::Communicator& comm, sim::NodeMeter& meter) {
    meter.begin_step(0);
    auto pending = comm.all_reduce_async({kPayload.clone()});
    meter.end_step();
    meter.begin_step(1);
    pending.wait();
    meter.end_step();
  });
  const sim::NodeMeter &fast = *cluster.meters[0], &slow = *cluster.meters[1];
  CHECK(fast.clock() == 0.4 + T);
  CHECK(fast.waiting_seconds() == Approx(0.2));
  CHECK(fast.communication_seconds() == T);
  CHECK(slow.clock() == 0.8);  // its second step hid the whole transfer (T < 0.4 s)
  CHECK(slow.hidden_seconds() == T);
  CHECK(slow.waiting_seconds() == 0);
}

TEST_CASE("a handle dropped is an error naming its collective, not a hang, and one in flight at the end lands",
          "[overlap]") {
  SimCluster cluster(2, k100Mbit, kStep);
  SECTION("dropped") {
    REQUIRE_THROWS_WITH(cluster.run([&](int, sdk::Communicator& comm, sim::NodeMeter& meter) {
      meter.begin_step(3);
      { auto dropped = comm.all_gather_async({kPayload}); }
      meter.end_step();
    }),
                        Catch::Contains("the all_gather started at step 3 was never waited for: its handle "
                                        "(sdk::Pending) was destroyed or assigned over before wait()"));
  }
  SECTION("in flight at the end of the run: it lands, the clock moving to its end") {
    // Two transfers started after the step's 100 ms of compute, one after
    // the other on the link: T each (the all-reduce's time).
    std::vector<sdk::Pending> kept(2), also(2);
    cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
      meter.begin_step(5);
      kept[rank] = comm.all_reduce_async({kPayload.clone()});
      also[rank] = comm.all_reduce_async({kPayload.clone()});
      meter.end_step();
      meter.land_transfers();
    });
    const double T = cluster.network.all_reduce_time(kBytes, 2);
    for (const auto& meter : cluster.meters) {
      CHECK(meter->clock() == Approx(kStep + 2 * T));
      CHECK(meter->communication_seconds() == Approx(2 * T));
      CHECK(meter->hidden_seconds() == Approx(0).margin(1e-12));
      CHECK(meter->waiting_seconds() == Approx(0).margin(1e-12));
    }
    // Landed: the handles may go without wait().
    kept.clear();
    also.clear();
    for (const auto& meter : cluster.meters) CHECK_NOTHROW(meter->end_step());
  }
  SECTION("waited for twice") {
    std::atomic<int> valid{0};
    REQUIRE_THROWS_WITH(cluster.run([&](int, sdk::Communicator& comm, sim::NodeMeter&) {
      auto pending = comm.all_reduce_async({kPayload.clone()});
      pending.wait();
      valid += pending.valid();
      pending.wait();
    }),
                        Catch::Contains("wait() on a Pending that holds no collective"));
    CHECK(valid == 0);
  }
}

TEST_CASE("communicators without overlap (test doubles) complete non-blocking collectives at once", "[overlap]") {
  std::vector<std::vector<at::Tensor>> expected(2), actual(2);
  run_nodes(2, 2, [&](int rank, sdk::Communicator& comm) {
    expected[rank] = rank_tensors(rank);
    comm.all_reduce(expected[rank]);
    actual[rank] = comm.all_reduce_async(rank_tensors(rank)).wait();
  });
  for (int r = 0; r < 2; ++r) CHECK(same_tensors(actual[r], expected[r]));
}

TEST_CASE("an abort wakes a node starting a non-blocking collective", "[overlap]") {
  std::atomic<bool> calling{false}, woken{false};
  REQUIRE_THROWS_WITH(run_nodes(2, 2,
                                [&](int rank, sdk::Communicator& comm) {
                                  if (rank == 1) {
                                    // Fails once node 0 is in (or about to enter) its collective.
                                    while (!calling) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                    throw std::runtime_error("node 1 exploded");
                                  }
                                  try {
                                    calling = true;
                                    comm.all_reduce_async({kPayload.clone()}).wait();
                                  } catch (const sdk::AbortedError&) {
                                    woken = true;
                                    throw;
                                  }
                                }),
                      "node 1 exploded");
  CHECK(woken);
}

TEST_CASE("a handle saved with its node's meter resumes in flight, and one not taken back is an error",
          "[overlap][checkpoint]") {
  SimCluster cluster(2, k100Mbit, kStep);
  json meter_state;
  sdk::StateDict saved;
  double finish = 0;
  cluster.run([&](int rank, sdk::Communicator& comm, sim::NodeMeter& meter) {
    meter.begin_step(0);
    auto pending = comm.all_gather_async({kPayload * rank});
    meter.end_step();
    if (rank == 0) {
      meter_state = meter.state();
      pending.save(saved, "p.");
    }
    meter.begin_step(1);
    pending.wait();
    meter.end_step();
    if (rank == 0) finish = meter.clock();
  });
  REQUIRE(meter_state["in_flight"].size() == 1);
  CHECK(meter_state["in_flight"][0]["kind"] == "all_gather");
  // Resumed: the handle comes back with its result and ends when it did.
  SimCluster resumed(2, k100Mbit, kStep);
  sim::NodeMeter& meter = *resumed.meters[0];
  meter.restore(meter_state);
  std::vector<at::Tensor> gathered;
  bool nothing_under_q = false;
  std::string twice;
  run_nodes(1, 1, [&](int, sdk::Communicator& inner) {
    sim::MeteredCommunicator comm(inner, meter, sim::TrafficSource::Strategy);
    auto pending = sdk::Pending::load(saved, "p.", comm);
    try {
      sdk::Pending::load(saved, "p.", comm);
    } catch (const sdk::Error& e) {
      twice = e.what();
    }
    // Nothing saved under another prefix: a Pending that holds nothing.
    nothing_under_q = !sdk::Pending::load(saved, "q.", comm).valid();
    meter.begin_step(1);
    gathered = pending.wait();
    meter.end_step();
  });
  CHECK_THAT(twice, Catch::Contains("held by another handle"));
  CHECK(nothing_under_q);
  REQUIRE(gathered.size() == 2);  // one tensor from each rank
  CHECK(at::equal(gathered[1], kPayload));
  CHECK(meter.clock() == finish);
  // A strategy that does not take its handle back.
  sim::NodeMeter& forgetful = *resumed.meters[1];
  forgetful.restore(meter_state);
  forgetful.begin_step(1);
  CHECK_THROWS_WITH(forgetful.end_step(), Catch::Contains("the checkpoint holds the all_gather started at step 0 in "
                                                          "flight, which the strategy did not take back"));
}

namespace {

// Two nodes of small_manifest's MLP (1188 float32 parameters, 4752 bytes)
// averaging their gradients one step late (tests/plugins/delayed_sgd.cpp),
// on a network where every number is a power of two, so that the clocks'
// sums are exact: 304128 B/s = 4752 B x 64 and 1/128 s of latency make an
// all-reduce take T = 2 (1/128 + 4752 / (2 x 304128)) = 1/32 s.
constexpr int kOverlapSteps = 12;
constexpr double kT = 1.0 / 32;

json delayed_manifest(const std::string& step_time, json options) {
  json m = exogym::test::small_manifest(2);
  m["train"]["max_steps"] = kOverlapSteps;
  m["strategy"] = {{"plugin", "delayed_sgd"}, {"options", std::move(options)}};
  m["network"] = {{"bandwidth", "304128B/s"}, {"latency", "0.0078125s"}};
  m["compute"] = {{"step_time", step_time}};
  return m;
}

}  // namespace

TEST_CASE("delayed SGD on non-blocking all-reduces: the blocking run's model and bytes, the overlap in closed form",
          "[overlap]") {
  // d > T: every transfer but the last hides behind the next step's
  // compute. d < T: each step waits for what is left, T - d.
  const auto [step_time, d] =
      GENERATE(std::make_pair(std::string("0.0625s"), 1.0 / 16), std::make_pair(std::string("0.015625s"), 1.0 / 64));
  INFO("step time " << step_time);
  TempDir dir("overlap-runs");
  const fs::path blocking = dir / "blocking", async = dir / "async", again = dir / "again";
  for (const auto& folder : {blocking, async, again}) fs::create_directories(folder);
  exogym::test::run_json(delayed_manifest(step_time, {{"blocking", true}}), blocking);
  exogym::test::run_json(delayed_manifest(step_time, json::object()), async);
  exogym::test::run_json(delayed_manifest(step_time, json::object()), again);
  // The same averages, bit for bit, and the same bytes and comm.csv.
  CHECK(read_text(blocking / "run" / "model.pt") == read_text(async / "run" / "model.pt"));
  CHECK(read_text(blocking / "run" / "comm.csv") == read_text(async / "run" / "comm.csv"));
  const json b = summary_of(blocking / "run"), a = summary_of(async / "run");
  for (const char* key : {"bytes_sent_per_node", "bytes_sent_total", "collectives_per_node"})
    CHECK(a["communication"][key] == b["communication"][key]);
  CHECK(a["communication"]["bytes_sent_per_node"].get<double>() == kOverlapSteps * 4752.0);  // ring, K = 2: S per node
  // Blocking: N (d + T). Overlapped: N d + T when the next step hides a
  // transfer, d + N T when each step waits for the rest of one.
  CHECK(b["simulated"]["time_s"].get<double>() == kOverlapSteps * (d + kT));
  const double overlapped = d > kT ? kOverlapSteps * d + kT : d + kOverlapSteps * kT;
  CHECK(a["simulated"]["time_s"].get<double>() == overlapped);
  CHECK(a["simulated"]["compute_s"].get<double>() == kOverlapSteps * d);
  CHECK(a["simulated"]["communication_s"].get<double>() == overlapped - kOverlapSteps * d);
  CHECK(a["simulated"]["hidden_s"].get<double>() == kOverlapSteps * kT - (overlapped - kOverlapSteps * d));
  CHECK(a["simulated"]["waiting_s"].get<double>() == 0);
  CHECK(b["simulated"]["hidden_s"].get<double>() == 0);
  // Reproducible: the same clocks, run after run.
  CHECK(summary_of(again / "run")["simulated"] == a["simulated"]);
  CHECK(read_text(again / "run" / "train.csv") == read_text(async / "run" / "train.csv"));
}

TEST_CASE("a run resumed while its handles are in flight is the uninterrupted run, bit for bit",
          "[overlap][checkpoint]") {
  const std::string collective = GENERATE("all_reduce", "all_gather");
  INFO(collective);
  TempDir dir("overlap-resume");
  json m = exogym::test::checkpointed_manifest(3, 4);
  // Averages start at steps 0, 1, 2, ... and are used three steps later:
  // the checkpoint after 4 steps holds those started at steps 1 to 3.
  m["strategy"] = {{"plugin", "delayed_sgd"}, {"options", {{"delay", 3}, {"collective", collective}}}};
  m["network"] = {{"bandwidth", "10Mbit/s"}, {"latency", "20ms"}};
  m["train"]["max_steps"] = 12;
  exogym::test::train_into(m, dir / "whole");
  m["train"]["max_steps"] = 7;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=12"}, 4);
  exogym::test::require_same_run(dir / "whole", dir / "parts");
  CHECK(summary_of(dir / "whole")["simulated"]["hidden_s"].get<double>() > 0);
}

TEST_CASE(
    "a strategy that drops a handle stops the run naming node, step and strategy, and one kept past the end lands",
    "[overlap]") {
  TempDir dir("overlap-leak");
  SECTION("dropped") {
    const json m = delayed_manifest("10ms", {{"leak", "drop"}, {"leak_node", 1}, {"leak_step", 2}});
    REQUIRE_THROWS_WITH(exogym::test::run_json(m, dir.path()),
                        Catch::Contains("node 1, step 2, step of strategy \"delayed_sgd\"") &&
                            Catch::Contains("the all_reduce started at step 2 was never waited for: its handle "
                                            "(sdk::Pending) was destroyed or assigned over before wait()"));
  }
  SECTION("still in flight after the last step") {
    // Node 0 keeps the average started at the last step instead of waiting
    // for it there: it lands after the last checkpoint, at the same time.
    fs::create_directories(dir / "kept");
    fs::create_directories(dir / "waited");
    exogym::test::run_json(delayed_manifest("10ms", {{"leak", "end"}, {"leak_node", 0}}), dir / "kept");
    exogym::test::run_json(delayed_manifest("10ms", json::object()), dir / "waited");
    const json kept = summary_of(dir / "kept" / "run"), waited = summary_of(dir / "waited" / "run");
    CHECK(kept["communication"]["per_node"][0]["time_s"] == waited["communication"]["per_node"][0]["time_s"]);
    CHECK(kept["communication"]["per_node"][0]["communication_s"] ==
          waited["communication"]["per_node"][0]["communication_s"]);
  }
}

TEST_CASE("a node that rejoins takes its donor's handles in flight and ends with the others", "[overlap][faults]") {
  TempDir dir("overlap-rejoin");
  json m = delayed_manifest("10ms", {{"delay", 3}});
  m["nodes"] = 3;
  m["train"]["max_steps"] = 14;
  m["network"] = {{"bandwidth", "10Mbit/s"}, {"latency", "20ms"}, {"failure_timeout", "50ms"}};
  // Down at steps 5 to 7: at step 8 the donor holds the averages of steps
  // 5 to 7 in flight, which node 2 takes with the default recovery state.
  m["faults"] = json::array({{{"node", 2}, {"fail_at", 5}, {"rejoin_at", 8}}});
  exogym::test::run_json(m, dir.path());
  CHECK_THAT(read_text(dir / "run" / "events.csv"), Catch::Contains(",2,rejoin,"));
  const json nodes = summary_of(dir / "run")["communication"]["per_node"];
  REQUIRE(nodes.size() == 3);
  for (const auto& node : nodes) CHECK(node["time_s"] == nodes[0]["time_s"]);
}

TEST_CASE("over two processes, non-blocking collectives give the single process's model, bytes and clocks",
          "[overlap][multiprocess][cli][slow]") {
  TempDir dir("overlap-mp");
  json m = delayed_manifest("0.015625s", {{"delay", 2}, {"collective", "all_gather"}});
  m["nodes"] = 4;
  m["strategy"]["plugin"] = std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_delayed_sgd.so";
  std::map<std::string, fs::path> folders;
  for (const std::string processes : {"1", "2"}) {
    m["output"]["dir"] = "out" + processes;
    const auto file = exogym::test::write_manifest(dir, "m" + processes, m);
    std::vector<std::string> args = {"--quiet", file.string()};
    if (processes != "1") args = {"--quiet", "--nproc", processes, "--timeout", "20", file.string()};
    const exogym::test::Outcome o = exogym::test::run_cli(args, dir / ("log" + processes + ".txt"));
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[processes] = exogym::test::run_folder(dir, "out" + processes);
  }
  for (const char* file : {"model.pt", "train.csv", "comm.csv"}) {
    INFO(file);
    CHECK(read_text(folders["1"] / file) == read_text(folders["2"] / file));
  }
  const json one = summary_of(folders["1"]), two = summary_of(folders["2"]);
  CHECK(two["communication"] == one["communication"]);
  CHECK(two["simulated"]["time_s"] == one["simulated"]["time_s"]);
  CHECK(two["simulated"]["hidden_s"] == one["simulated"]["hidden_s"]);
  CHECK(one["simulated"]["hidden_s"].get<double>() > 0);
}
