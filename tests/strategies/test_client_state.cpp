// State that belongs to a client (Strategy::has_client_state,
// runtime/train/client_store.h) and SCAFFOLD, whose control variates are
// such state (plugins/scaffold/scaffold.cpp): the store's rules; a client's
// state follows it to whichever node trains it next, for SCAFFOLD,
// SparseLoCo's error buffers and DeMo's momentum; SCAFFOLD's server variate stays the mean of
// every client's, the property that breaks when a client's variate is lost;
// SCAFFOLD with one local step is SGD on the mean gradient; a population run
// with client state resumes exactly; SCAFFOLD refuses a local step other
// than plain SGD. (Resume, failures and processes for every built-in
// strategy: builtin_strategies in checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/train/client_store.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::train::ClientStore;
using exogym::test::TempDir;
using nlohmann::json;

namespace {

using Tensors = std::map<std::string, at::Tensor>;
using exogym::test::clients_trained;
using exogym::test::sgd_spec;

// `plugin` in rounds of 2 steps on 3 nodes, each round's 3 clients drawn
// from `clients`, with Dirichlet(0.1) labels; a checkpoint after every round.
json population(const std::string& plugin, const json& options, int clients) {
  json m = exogym::test::checkpointed_manifest(3, 2);
  m["checkpoint"]["keep"] = 100;
  m["strategy"] = {{"plugin", plugin}, {"options", options}};
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
  m["train"]["max_steps"] = 16;
  m["participation"] = {{"clients", clients}, {"per_round", 3}};
  return m;
}

fs::path checkpoint(const fs::path& run, int64_t step) {
  return run / "checkpoints" / ("step-" + std::to_string(step));
}

Tensors tensors_of(const fs::path& file) {
  Tensors out;
  for (auto& [name, t] : exogym::runtime::output::read_safetensors(file).tensors) out[name] = t;
  return out;
}

// The tensors of `file` whose name starts with `prefix`, by what follows it.
Tensors with_prefix(const Tensors& all, const std::string& prefix) {
  Tensors out;
  for (const auto& [name, t] : all)
    if (name.compare(0, prefix.size(), prefix) == 0) out[name.substr(prefix.size())] = t;
  return out;
}

// metrics.csv's "client" rows: {step: {node: client}}.
bool same_state(const Tensors& a, const Tensors& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || !at::equal(t, it->second)) return false;
  }
  return true;
}

exogym::sdk::StateDict state_of(float value) { return {{"x", at::full({2}, value)}}; }

float value_of(const exogym::sdk::StateDict& state) { return state.at("x")[0].item<float>(); }

}  // namespace

TEST_CASE("client store: a client that leaves keeps its state, one that stays keeps it on its node", "[client_state]") {
  ClientStore store;
  // Nodes 0, 1, 2 trained clients 10, 11, 12; 11 leaves, 12's node fails.
  store.offer(0, 10, state_of(1));
  store.offer(1, 11, state_of(2));
  store.offer(2, 12, state_of(3));
  store.offer(3, 13, {});  // nothing to keep: nothing stored
  store.settle({1, 3}, {}, {12}, nullptr);
  CHECK(store.clients() == 1);
  CHECK(store.bytes() == 8);
  CHECK(store.handed(11).empty());  // stored, not handed over
  // A later round: client 11 comes back (to any node), 14 is new.
  store.settle({}, {11, 14}, {}, nullptr);
  REQUIRE(store.handed(11).size() == 1);
  CHECK(value_of(store.handed(11)) == 2);
  CHECK(store.handed(14).empty());
  CHECK(store.clients() == 0);
  CHECK(store.bytes() == 0);
  // Offers of the nodes that keep their client are dropped at the meeting.
  store.offer(0, 10, state_of(5));
  store.settle({}, {}, {}, nullptr);
  CHECK(store.clients() == 0);
  // A failure loses the state a client kept since it left.
  store.offer(0, 10, state_of(6));
  store.settle({0}, {}, {}, nullptr);
  CHECK(store.clients() == 1);
  store.settle({}, {}, {10}, nullptr);
  CHECK(store.clients() == 0);
}

TEST_CASE(
    "client state: a client's state follows it to whichever node trains it next, for SCAFFOLD, SparseLoCo and "
    "DeMo",
    "[client_state][population][scaffold][sparseloco][demo]") {
  const std::map<std::string, std::pair<json, std::pair<std::string, std::string>>> cases = {
      {"scaffold", {{{"H", 2}, {"optimizer", sgd_spec(0.05)}}, {"strategy.client_c.", "control_variate."}}},
      {"sparseloco",
       {{{"H", 2}, {"chunk", 64}, {"density", 0.1}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}},
        {"strategy.module0.error.", "module0.error."}}},
      // No H: rounds of 2 steps come from participation.round.
      {"demo",
       {{{"compression_topk", 4}, {"compression_chunk", 8}, {"lr", 0.01}}, {"strategy.delta_dct.", "delta_dct."}}},
  };
  for (const auto& [plugin, spec] : cases) {
    SECTION(plugin) {
      TempDir dir("client-state-" + plugin);
      json m = population(plugin, spec.first, 9);
      m["participation"]["round"] = 2;
      const fs::path run = exogym::test::train_in(m, dir, "run");
      const std::string node_prefix = spec.second.first, client_prefix = spec.second.second;
      const auto trained = clients_trained(run);
      REQUIRE(trained.size() == 8);
      int checked = 0;
      // Round k is steps 2k and 2k + 1; checkpoint 2k holds the state its
      // nodes left round k - 1 with, and checkpoint 2k + 2 the store after
      // the meeting of round k.
      for (int64_t k = 1; k + 1 < 8; ++k) {
        std::set<int> in_round;
        for (const auto& [node, client] : trained.at(2 * k)) in_round.insert(client);
        const Tensors store = tensors_of(checkpoint(run, 2 * k + 2) / "clients.safetensors");
        for (const auto& [node, client] : trained.at(2 * k - 2)) {
          if (in_round.count(client)) continue;
          INFO("round " << k << ": client " << client << " left node " << node);
          const Tensors left = with_prefix(
              tensors_of(checkpoint(run, 2 * k) / ("node-" + std::to_string(node) + ".safetensors")), node_prefix);
          const Tensors kept = with_prefix(store, "client." + std::to_string(client) + "." + client_prefix);
          REQUIRE(!left.empty());
          CHECK(same_state(left, kept));
          ++checked;
        }
      }
      CHECK(checked >= 6);
      const json summary = json::parse(exogym::test::read_text(run / "summary.json"));
      CHECK(summary.at("participation").at("clients_with_state").get<int>() >= 3);
      CHECK(summary.at("participation").at("client_state_bytes").get<double>() > 0);
    }
  }
}

TEST_CASE(
    "scaffold: the server's control variate is the mean of every client's, with clients coming back to "
    "other nodes",
    "[client_state][population][scaffold]") {
  TempDir dir("scaffold-mean");
  const int clients = 9;
  const fs::path run =
      exogym::test::train_in(population("scaffold", {{"H", 2}, {"optimizer", sgd_spec(0.05)}}, clients), dir, "run");
  for (int64_t step = 2; step <= 16; step += 2) {
    INFO("after step " << step);
    const Tensors store = tensors_of(checkpoint(run, step) / "clients.safetensors");
    const Tensors node0 = tensors_of(checkpoint(run, step) / "node-0.safetensors");
    for (int i = 0; i < 4; ++i) {
      const std::string index = std::to_string(i);
      at::Tensor sum = at::zeros_like(node0.at("strategy.server_c." + index));
      for (int node = 0; node < 3; ++node) {
        sum += tensors_of(checkpoint(run, step) / ("node-" + std::to_string(node) + ".safetensors"))
                   .at("strategy.client_c." + index);
      }
      const std::string suffix = ".control_variate." + index;  // of "client.<c>.control_variate.<i>"
      for (const auto& [name, t] : store) {
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
          sum += t;
      }
      const at::Tensor c = node0.at("strategy.server_c." + index);
      CHECK(c.abs().max().item<double>() > 1e-3);
      CHECK((sum / clients - c).abs().max().item<double>() < 1e-5);
    }
  }
}

TEST_CASE("scaffold with one local step and every node in every round is SGD on the mean gradient",
          "[client_state][scaffold]") {
  TempDir dir("scaffold-sgd");
  const fs::path a = exogym::test::train_in(
      exogym::test::with_strategy(4, "fedavg", {{"H", 1}, {"optimizer", sgd_spec(0.05)}}), dir, "fedavg");
  const fs::path b = exogym::test::train_in(
      exogym::test::with_strategy(4, "scaffold", {{"H", 1}, {"optimizer", sgd_spec(0.05)}}), dir, "scaffold");
  const auto fedavg = exogym::test::load_model_pt(a / "model.pt"),
             scaffold = exogym::test::load_model_pt(b / "model.pt");
  CHECK(exogym::test::max_abs_diff(fedavg, scaffold) < 1e-5);
  // With rounds of 4 steps the correction makes it another method than
  // FedAvg's (from the second round on).
  const fs::path c = exogym::test::train_in(
      exogym::test::with_strategy(4, "fedavg", {{"H", 4}, {"optimizer", sgd_spec(0.05)}}), dir, "fedavg4");
  const fs::path d = exogym::test::train_in(
      exogym::test::with_strategy(4, "scaffold", {{"H", 4}, {"optimizer", sgd_spec(0.05)}}), dir, "scaffold4");
  CHECK(exogym::test::max_abs_diff(exogym::test::load_model_pt(c / "model.pt"),
                                   exogym::test::load_model_pt(d / "model.pt")) > 1e-4);
}

TEST_CASE("client state: a population run stopped inside a round resumes with its clients' states, exactly",
          "[client_state][population][scaffold][checkpoint]") {
  TempDir dir("client-state-resume");
  json m = population("scaffold", {{"H", 2}, {"optimizer", sgd_spec(0.05)}}, 9);
  exogym::test::train_into(m, dir / "whole");
  m["train"]["max_steps"] = 11;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=16"});
  exogym::test::require_same_run(dir / "whole", dir / "parts");
  // From a round's first step too (the clients leave in the resumed run).
  exogym::test::resume_in(dir / "parts", {}, 10);
  exogym::test::require_same_run(dir / "whole", dir / "parts");
}

TEST_CASE("scaffold: a local step other than plain SGD is refused at its option", "[client_state][scaffold]") {
  TempDir dir("scaffold-refusals");
  int tries = 0;
  auto error_of = [&](const json& options) {
    try {
      exogym::test::train_in(exogym::test::with_strategy(2, "scaffold", options), dir, "r" + std::to_string(++tries));
    } catch (const exogym::sdk::ConfigError& e) {
      return e.path() + ": " + e.message();
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of({{"optimizer", "adamw"}}),
             Catch::StartsWith("strategy.options.optimizer: SCAFFOLD's local step is plain SGD"));
  CHECK_THAT(error_of({{"optimizer", {{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}}}}),
             Catch::StartsWith("strategy.options.optimizer: SCAFFOLD's local step is plain SGD"));
  CHECK(error_of({{"H", 2}}) == "no error");  // plain SGD by default
}
