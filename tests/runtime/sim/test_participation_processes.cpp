// Partial participation over several processes (docs/simulation.md#partial-participation):
// the draws do not depend on the process count, a process none of whose
// nodes is drawn sits the round out, and the state reaches a node drawn
// again from another process; the run is the single-process run, bit for
// bit, with a population of clients too. Every run is a child process
// killed after a time limit.
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("participation over --nproc 2 and 3 is the single-process run, bit for bit, and resumes across layouts",
          "[participation][multiprocess][slow]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    if (plugin != "diloco" && plugin != "fedavg") continue;
    SECTION(plugin) {
      TempDir dir("participation-nproc-" + plugin);
      json m = checkpointed_manifest(6, 5);
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      m["train"]["max_steps"] = 16;
      m["eval"]["interval"] = 5;
      m["participation"] = {{"per_round", 2}};  // 2 of 6: whole processes sit rounds out
      m["checkpoint"]["keep"] = 4;
      const fs::path single = run_layout(dir, m, "p1", {});
      CHECK(json::parse(read_text(single / "summary.json")).at("participation").at("returns").get<int>() > 0);
      for (const std::string processes : {"2", "3"}) {
        INFO("--nproc " << processes);
        require_same_run(single, run_layout(dir, m, "p" + processes, {"--nproc", processes}));
      }
      // Saved over 3 processes, resumed over 2 from step 5, inside a round.
      const fs::path again = run_layout(dir, m, "again", {"--nproc", "3"});
      const Outcome resumed =
          run_cli({"--resume", again.string(), "--from-step", "5", "--nproc", "2", "--quiet", "--timeout", "20"},
                  dir / "resumed.log", 120);
      INFO(resumed.output);
      REQUIRE(resumed.code == 0);
      require_same_run(single, again);
    }
  }
}

TEST_CASE("a population of 500 clients over --nproc 2 is the single-process run, bit for bit",
          "[participation][population][multiprocess][slow]") {
  TempDir dir("population-nproc");
  json m = checkpointed_manifest(4, 5);
  m["strategy"] = {{"plugin", "fedavg"}, {"options", {{"H", 3}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}}};
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
  m["train"]["max_steps"] = 12;
  m["eval"]["interval"] = 6;
  m["participation"] = {{"clients", 500}, {"per_round", 3}};  // the clients of 2 processes' nodes change each round
  const fs::path single = run_layout(dir, m, "p1", {});
  CHECK(json::parse(read_text(single / "summary.json")).at("participation").at("returns").get<int>() >= 9);
  require_same_run(single, run_layout(dir, m, "p2", {"--nproc", "2"}));
}

TEST_CASE("clients that keep state between rounds over --nproc 2: the single-process run, bit for bit, and resumed",
          "[participation][population][client_state][multiprocess][slow]") {
  // 12 clients on 4 nodes: a client's SCAFFOLD variate left on a node of
  // one process is taken on by a node of the other.
  TempDir dir("client-state-nproc");
  json m = checkpointed_manifest(4, 4);
  m["strategy"] = {{"plugin", "scaffold"}, {"options", {{"H", 2}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}}};
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
  m["train"]["max_steps"] = 16;
  m["eval"]["interval"] = 8;
  m["participation"] = {{"clients", 12}, {"per_round", 4}};
  m["checkpoint"]["keep"] = 4;
  const fs::path single = run_layout(dir, m, "p1", {});
  CHECK(json::parse(read_text(single / "summary.json")).at("participation").at("clients_with_state").get<int>() > 0);
  require_same_run(single, run_layout(dir, m, "p2", {"--nproc", "2"}));
  // Saved over 2 processes, resumed in one from step 8 (a round's start).
  const fs::path again = run_layout(dir, m, "again", {"--nproc", "2"});
  const Outcome resumed =
      run_cli({"--resume", again.string(), "--from-step", "8", "--quiet", "--timeout", "20"}, dir / "resumed.log", 120);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  require_same_run(single, again);
}

}  // namespace exogym::test
