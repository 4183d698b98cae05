// Populations of clients larger than the nodes
// (docs/simulation.md#populations-of-clients): the draw over a population
// without a vector of it, the clients' data drawn from the seed, nodes that
// take on each round's clients and receive the state, the same run as today
// when the clients are the nodes, exact resumes, and every bad input.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/data/population_sampler.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/participation.h"
#include "exogym/runtime/train/training.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using exogym::test::check_run_error;
using exogym::test::clients_trained;
using nlohmann::json;

namespace {

// FedAvg in rounds of 2 steps on 4 nodes, drawing 3 of `clients` clients
// each round, with Dirichlet label shares (alpha 0.1) over the synthetic
// data's 4 labels.
json population_manifest(int clients) {
  json m = checkpointed_manifest(4, 5);
  m["strategy"] = {{"plugin", "fedavg"},
                   {"options", {{"H", 2}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}}}}}};
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
  m["train"]["max_steps"] = 20;
  m["participation"] = {{"clients", clients}, {"per_round", 3}};
  return m;
}

// metrics.csv's "client" rows: {step: {node: client}}.
}  // namespace

TEST_CASE("population: the draw over a population is the draw over a vector of every client",
          "[participation][population]") {
  for (uint64_t seed : {1ULL, 42ULL, 987654321ULL}) {
    for (int population : {1, 7, 100, 5000}) {
      std::vector<int> all(static_cast<size_t>(population));
      for (int c = 0; c < population; ++c) all[static_cast<size_t>(c)] = c;
      for (int count : {1, std::min(population, 3), population}) {
        INFO("seed " << seed << ", " << count << " of " << population);
        CHECK(runtime::sim::draw_clients(seed, population, count) == runtime::sim::draw_participants(seed, all, count));
      }
    }
  }
  // A million clients: 100 distinct ones, sorted, different each round.
  runtime::sim::ParticipationSpec spec;
  spec.per_round = 100;
  spec.clients = 1000000;
  runtime::sim::Participation draws(spec, 10, 7);
  const std::vector<int> first = draws.take_clients(0, nullptr), second = draws.take_clients(1, nullptr);
  REQUIRE(first.size() == 100);
  CHECK(std::is_sorted(first.begin(), first.end()));
  CHECK(std::adjacent_find(first.begin(), first.end()) == first.end());
  CHECK(first.back() < 1000000);
  CHECK(first != second);
  CHECK(draws.take_clients(0, nullptr) == first);
}

TEST_CASE("population: a client's batches come from its own label shares, the same whoever trains it",
          "[participation][population]") {
  // 4,000 examples, labels 0 to 3 in turn.
  std::vector<int64_t> labels(4000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i % 4);
  runtime::data::PartitionSpec dirichlet;
  dirichlet.kind = runtime::data::PartitionSpec::Kind::Dirichlet;
  dirichlet.alpha = 0.1;
  auto slots = std::make_shared<runtime::data::ClientSlots>(2);
  const runtime::data::PopulationSampler sampler(dirichlet, 4000, &labels, 1000000, 64, 5, slots);
  // Client 123,456's shares, and 200 of its batches' labels against them.
  const std::vector<double> shares = sampler.label_shares(123456);
  REQUIRE(shares.size() == 4);
  std::vector<double> seen(4, 0);
  for (int64_t step = 0; step < 200; ++step) {
    for (int64_t index : sampler.client_batch(123456, step)) seen[static_cast<size_t>(labels[index])] += 1;
  }
  for (size_t l = 0; l < 4; ++l) CHECK(seen[l] / (200 * 64) == Approx(shares[l]).margin(0.02));
  // alpha 0.1: one label dominates most clients.
  int skewed = 0;
  for (int c = 0; c < 100; ++c) {
    const std::vector<double> s = sampler.label_shares(c);
    skewed += *std::max_element(s.begin(), s.end()) > 0.7;
  }
  CHECK(skewed > 60);
  // A node trains the client its slot holds: node 1 holding client 123,456
  // draws client 123,456's batch, and node 0 its own client 0's.
  slots->assign(1, 123456);
  CHECK(sampler.batch_indices(1, 17) == sampler.client_batch(123456, 17));
  CHECK(sampler.batch_indices(0, 17) == sampler.client_batch(0, 17));
  CHECK(sampler.client_batch(0, 17) != sampler.client_batch(1, 17));
  // IID: uniform over the whole set.
  const runtime::data::PopulationSampler iid(runtime::data::PartitionSpec{}, 4000, nullptr, 1000000, 64, 5, slots);
  std::vector<double> iid_seen(4, 0);
  for (int64_t step = 0; step < 200; ++step) {
    for (int64_t index : iid.client_batch(999999, step)) iid_seen[static_cast<size_t>(labels[index])] += 1;
  }
  for (double count : iid_seen) CHECK(count / (200 * 64) == Approx(0.25).margin(0.02));
}

TEST_CASE("population: bad sections are refused naming the field", "[participation][population]") {
  const json m = population_manifest(1000);
  auto with = [&](const std::function<void(json&)>& change) {
    json out = m;
    change(out);
    return check_run_error(out);
  };
  CHECK(check_run_error(m) == "(no error)");
  CHECK(with([](json& j) { j["participation"]["clients"] = 3; }) ==
        "participation.clients: 3 clients, but the run has 4 nodes; at least nodes (each node trains one drawn "
        "client at a time)");
  CHECK(with([](json& j) {
          j["participation"]["clients"] = 0;
        }).rfind("participation.clients: expected a positive integer", 0) == 0);
  CHECK(with([](json& j) { j["participation"]["per_round"] = 5; }) ==
        "participation.per_round: 5 clients drawn each round, but the run has 4 nodes to train them; at most nodes");
  // Clients as many as the nodes: the nodes are the clients, as before.
  CHECK(with([](json& j) {
          j["participation"]["clients"] = 4;
          j["participation"]["per_round"] = 5;
        }) == "participation.per_round: 5 nodes drawn each round, but the run has 4 nodes; at most nodes");
  CHECK(with([](json& j) {
          j["participation"].erase("per_round");
          j["participation"]["fraction"] = 0.01;
        }) ==
        "participation.fraction: 0.01 of 1000 clients is 10 each round, but the run has 4 nodes to train them; at "
        "most nodes");
  CHECK(with([](json& j) {
          j["participation"].erase("per_round");
          j["participation"]["fraction"] = 1.5;
        }).rfind("participation.fraction: expected a fraction in (0, 1]", 0) == 0);
  CHECK(with([](json& j) {
          j["participation"].erase("per_round");
          j["participation"]["fraction"] = 0.004;
        }) == "(no error)");
  CHECK(with([](json& j) {
          j["faults"] = json::parse(R"([{"node": 1, "fail_at": 3}])");
        }).rfind("faults: does not combine with a population (participation.clients: 1000 clients)", 0) == 0);
  CHECK(with([](json& j) {
          j["compute"]["speed"] = {{"1", 2.0}};
        }).rfind("compute.speed: lists nodes, but with participation.clients (1000 clients)", 0) == 0);
  CHECK(with([](json& j) {
          j["network"] = {{"nodes", {{"1", {{"latency", "1ms"}}}}}};
        }).rfind("network.nodes: lists nodes, but with participation.clients", 0) == 0);
  CHECK(with([](json& j) {
          j["data"]["train"]["partition"] = {{"name", "shards"}, {"shards_per_node", 2}};
        }) ==
        "data.train.partition: \"shards\" cannot share the data among 1000 clients: use \"iid\" or \"dirichlet\"");
}

TEST_CASE("population: as many clients as nodes, all drawn every round, is the run without the section, bit for bit",
          "[participation][population]") {
  TempDir dir("population-all");
  json m = population_manifest(4);
  m.erase("participation");
  run_json(m, dir / "plain");
  m["participation"] = {{"clients", 4}, {"per_round", 4}};
  run_json(m, dir / "all");
  const fs::path plain = dir / "plain" / "run", all = dir / "all" / "run";
  for (const char* file : {"model.pt", "validation.csv", "comm.csv", "data.csv"}) {
    INFO(file);
    CHECK(read_text(plain / file) == read_text(all / file));
  }
  const json a = json::parse(read_text(plain / "summary.json")), b = json::parse(read_text(all / "summary.json"));
  CHECK(a.at("communication") == b.at("communication"));
  CHECK(a.at("simulated").at("time_s") == b.at("simulated").at("time_s"));
}

TEST_CASE(
    "population: 3 of 1000 clients a round on 4 nodes: each round's clients, their state sent, reproducible and "
    "resumed exactly",
    "[participation][population]") {
  TempDir dir("population-run");
  json m = population_manifest(1000);
  m["parallelism"] = 1;
  const auto result = run_json(m, dir / "p1");
  const fs::path run = dir / "p1" / "run";
  // Round k's clients go to nodes 0, 1, 2 in client order.
  runtime::sim::ParticipationSpec spec;
  spec.per_round = 3;
  spec.clients = 1000;
  runtime::sim::Participation draws(spec, 2, 7);
  const auto trained = clients_trained(run);
  REQUIRE(trained.size() == 10);
  std::vector<int> held = {0, 1, 2, 3};  // before the first draw, node r is client r
  int64_t changes = 0;
  for (int64_t k = 0; k < 10; ++k) {
    const std::vector<int> drawn = draws.take_clients(k, nullptr);
    INFO("round " << k);
    const std::map<int, int> expected = {{0, drawn[0]}, {1, drawn[1]}, {2, drawn[2]}};
    CHECK(trained.at(2 * k) == expected);
    for (int node = 0; node < 3; ++node) changes += held[node] != drawn[node];
    std::copy(drawn.begin(), drawn.end(), held.begin());
  }
  for (const auto& row : read_csv(run / "train.csv")) CHECK(row.at("live_nodes") == "3");
  // A node that takes on another client receives FedAvg's state (the
  // parameters and SGD's momentum) as a node drawn again does.
  REQUIRE(result.participation);
  CHECK(result.participation->returns == changes);
  CHECK(changes >= 27);
  // (Before the first momentum step, the parameters alone.)
  constexpr double kParamBytes = 4 * (32 * 32 + 32 + 4 * 32 + 4);
  CHECK(result.participation->transfer_bytes >= changes * kParamBytes);
  CHECK(result.participation->transfer_bytes <= changes * 2 * kParamBytes);
  CHECK(result.participation->transfer_bytes > 20 * 2 * kParamBytes);
  CHECK(result.examples_trained == 3 * 20 * 16);

  m["parallelism"] = 3;
  run_json(m, dir / "p3");
  require_same_run(run, dir / "p3" / "run");
  // Stopped after 11 steps, inside round 5 (steps 10 and 11), resumed to 20.
  m["train"]["max_steps"] = 11;
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=20"});
  require_same_run(run, dir / "parts");
}

TEST_CASE("population: with a trace over the clients, no client away at a round's start is drawn",
          "[participation][population][trace]") {
  TempDir dir("population-trace");
  // 1000 clients: the even ones away from 0.3 s on.
  {
    std::ofstream trace(dir / "trace.csv");
    trace << "client,time,available,speed,bandwidth\n";
    for (int c = 0; c < 1000; ++c) trace << c << ",0,1,,\n";
    for (int c = 0; c < 1000; c += 2) trace << c << ",0.3,0,,\n";
  }
  json m = population_manifest(1000);
  m["participation"]["trace"] = (dir / "trace.csv").string();
  m["compute"]["step_time"] = "100ms";
  m["network"] = {{"latency", "0s"}};
  run_json(m, dir / "run");
  const auto trained = clients_trained(dir / "run" / "run");
  REQUIRE(trained.size() == 10);
  int odd_only_rounds = 0;
  for (const auto& [step, nodes] : trained) {
    bool all_odd = true;
    for (const auto& [node, client] : nodes) all_odd = all_odd && client % 2 == 1;
    // Round 0 starts at 0 s, round 1 at 0.2 s: every client is available;
    // from round 2 (0.4 s) on, only the odd ones.
    if (step >= 4) CHECK(all_odd);
    odd_only_rounds += all_odd;
  }
  CHECK(odd_only_rounds >= 8);
}

}  // namespace exogym::test
