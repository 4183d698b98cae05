// Simulated failures over several processes (docs/multiprocess.md): a
// process whose nodes are all down sits the collectives out, the reporting
// node may live in any process, and the recovery crosses processes; the run
// is the single-process run, bit for bit. Every run is a child process
// killed after a time limit: a hang fails the test instead of stalling it.
#include <map>
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Six nodes; over 2 processes (nodes 0-2, 3-5) and 3 (0-1, 2-3, 4-5):
// - steps 3-7: nodes 0 and 1 down, and 2 from 4 to 6: process 0 has no live
//   node, the reporting node (node 3, then 2) lives in another process,
//   through an evaluation (step 5) and a checkpoint (step 5);
// - node 5 joins late at 6, node 2 rejoins at 7 and nodes 0, 1 at 8: the
//   state crosses processes both ways;
// - from 13 on, the reporting node is node 3 (process 1): it saves the
//   final model.
json failing_manifest(const std::string& plugin, const json& options) {
  json m = checkpointed_manifest(6, 5);
  m["strategy"] = {{"plugin", plugin}, {"options", options}};
  m["train"]["max_steps"] = 16;
  m["eval"]["interval"] = 5;
  m["faults"] = json::parse(R"([
    {"node": 0, "fail_at": 3, "rejoin_at": 8}, {"node": 1, "fail_at": 3, "rejoin_at": 8},
    {"node": 2, "fail_at": 4, "rejoin_at": 7}, {"node": 5, "join_at": 6}, {"node": 4, "fail_at": 10},
    {"node": 0, "fail_at": 12}, {"node": 1, "fail_at": 12}, {"node": 2, "fail_at": 13}])");
  return m;
}

}  // namespace

TEST_CASE("failures over --nproc 2 and 3 give the single-process run, bit for bit, with every built-in strategy",
          "[faults][multiprocess][cli][slow]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    SECTION(plugin) {
      TempDir dir("faults-nproc-" + plugin);
      const json m = failing_manifest(plugin, options);
      const fs::path single = run_layout(dir, m, "p1", {});
      const auto events = read_csv(single / "events.csv");
      REQUIRE(events.size() == 11);
      CHECK(events[3].at("detail").rfind("state from node 3: ", 0) == 0);  // node 5's late join
      for (const std::string processes : {"2", "3"}) {
        INFO("--nproc " << processes);
        require_same_run(single, run_layout(dir, m, "p" + processes, {"--nproc", processes}));
      }
      const json faults = json::parse(read_text(single / "summary.json")).at("faults");
      CHECK(faults.at("failures") == 7);
      CHECK(faults.at("rejoins") == 3);
      CHECK(faults.at("late_joins") == 1);
      CHECK(faults.at("live_nodes_at_end") == 2);
    }
  }
}

TEST_CASE("a run with failures saved over 3 processes resumes over 2 as the whole run",
          "[faults][multiprocess][slow]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    if (plugin != "diloco" && plugin != "fedavg") continue;
    SECTION(plugin) {
      TempDir dir("faults-nproc-resume-" + plugin);
      json m = failing_manifest(plugin, options);
      const fs::path whole = run_layout(dir, m, "whole", {});
      // Resumed from step 5, where process 0 has no live node (the
      // checkpoint saves the membership), to the end.
      m["checkpoint"]["keep"] = 4;
      const fs::path again = run_layout(dir, m, "again", {"--nproc", "3"});
      const Outcome resumed =
          run_cli({"--resume", again.string(), "--from-step", "5", "--nproc", "2", "--quiet", "--timeout", "20"},
                  dir / "resumed.log", 120);
      INFO(resumed.output);
      REQUIRE(resumed.code == 0);
      require_same_run(whole, again);
    }
  }
}

TEST_CASE("churn on the simulated clock over --nproc 2 is the single-process run", "[faults][multiprocess][slow]") {
  TempDir dir("faults-nproc-timed");
  const json m = timed_churn_manifest();
  const fs::path single = run_layout(dir, m, "p1", {});
  REQUIRE(read_csv(single / "events.csv").size() > 4);
  require_same_run(single, run_layout(dir, m, "p2", {"--nproc", "2"}));
}

TEST_CASE("churn on the clock with an mtbf of 1ns ends at once with exit 2 naming churn.mtbf", "[faults][cli]") {
  TempDir dir("faults-tiny-mtbf");
  const Outcome o = run_cli({write_manifest(dir, "tiny", timed_churn_manifest()).string(), "--quiet", "--set",
                             "nodes=3", "--set", R"(churn={"mtbf":"1ns","downtime":"1ns"})"},
                            dir / "tiny.log", 60);
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find("churn.mtbf: \"1ns\" is shorter than one step of the fastest node (10ms") != std::string::npos);
  CHECK(o.seconds < 30);
  CHECK_FALSE(fs::exists(run_folder(dir, "out")));
}

}  // namespace exogym::test
