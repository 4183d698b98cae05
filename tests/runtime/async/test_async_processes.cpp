// Asynchronous strategies over several processes
// (runtime/async/async_schedule.h, runtime/async/async_processes.h): every
// process's server takes every update in the same order, so a run over
// --nproc 2 or 3 is the single-process run, bit for bit, with slow nodes,
// a failure while an update is in flight and a late joiner; and a
// checkpoint written over 3 processes, with updates in flight, resumes over
// 2. Every run is a child process killed after a time limit.
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("async over --nproc 2 and 3 is the single-process run, bit for bit, and resumes across layouts",
          "[strategies][async][multiprocess][slow]") {
  for (const auto& [plugin, options] : async_strategies()) {
    SECTION(plugin) {
      TempDir dir("async-nproc-" + plugin);
      json m = checkpointed_manifest(6, 5);
      m["checkpoint"]["keep"] = 5;
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      // Transfers of 150 ms each way, two slow nodes in different
      // processes, node 3 failing with its first update on its way and
      // coming back, node 4 joining late.
      m["compute"] = {{"step_time", "1s"}, {"speed", {{"1", 0.5}, {"5", 0.25}}}};
      m["network"] = {{"bandwidth", "1000000TB/s"}, {"latency", "150ms"}};
      m["faults"] = {{{"node", 3}, {"fail_at", 4}, {"rejoin_at", 11}}, {{"node", 4}, {"join_at", 7}}};
      m["train"]["max_steps"] = 20;
      m["eval"]["interval"] = 5;
      const fs::path single = run_layout(dir, m, "p1", {});
      int stale = 0;
      for (const auto& row : read_csv(single / "metrics.csv")) stale += row.at("name") == "staleness";
      CHECK(stale >= 10);
      for (const std::string processes : {"2", "3"}) {
        INFO("--nproc " << processes);
        require_same_run(single, run_layout(dir, m, "p" + processes, {"--nproc", processes}));
      }
      // Saved over 3 processes at step 10, with updates in flight, resumed
      // over 2 (whose first nodes' files do not hold the server's state).
      const fs::path again = run_layout(dir, m, "again", {"--nproc", "3"});
      const Outcome resumed =
          run_cli({"--resume", again.string(), "--from-step", "10", "--nproc", "2", "--quiet", "--timeout", "20"},
                  dir / "resumed.log", 120);
      INFO(resumed.output);
      REQUIRE(resumed.code == 0);
      require_same_run(single, again);
    }
  }
}

TEST_CASE("async over a population, over --nproc 2, is the single-process run, bit for bit",
          "[strategies][async][population][multiprocess][slow]") {
  TempDir dir("async-population-nproc");
  json m = async_population_manifest({1, 0.5});
  m["eval"]["interval"] = 5;
  const fs::path single = run_layout(dir, m, "p1", {});
  int changes = 0;
  for (const auto& row : read_csv(single / "metrics.csv")) changes += row.at("name") == "client";
  CHECK(changes >= 9);
  require_same_run(single, run_layout(dir, m, "p2", {"--nproc", "2"}));
}

}  // namespace exogym::test
