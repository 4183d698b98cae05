#include "bench/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::bench {

namespace fs = std::filesystem;

const char* const kDescription =
    "Measures the whole exogym-run process on a small MNIST job, and the simulator against a bare LibTorch loop "
    "doing the same work, for the models mlp, cnn and nanogpt "
    "(small, block 128) at K = 1, 4 and 16 nodes, plus a node-count sweep (MLP DiLoCo), a parallelism sweep, the cost "
    "of reports, of checkpoints and of the non-finite check, bf16 against fp32, 16 nanoGPT-small DiLoCo nodes against "
    "a bare loop, DeMo's compression against the MLP's step, chunk-wise top-k's selection, "
    "then checks the performance targets. Every measurement runs in a fresh child process.";

bool BenchOptions::wants(const std::string& section) const {
  return std::find(sections.begin(), sections.end(), section) != sections.end();
}

void add_options(CLI::App& app, BenchOptions& o) {
  const std::string what = "What to measure";
  app.add_flag("--quick", o.quick,
               "a few steps of small configurations: checks that the harness works (used by ctest), not how fast "
               "anything is")
      ->group(what);
  app.add_option("--models", o.models, "comma-separated subset of mlp,cnn,nanogpt")
      ->type_name("LIST")
      ->delimiter(',')
      ->check(CLI::IsMember({"mlp", "cnn", "nanogpt"}))
      ->group(what);
  // The sections in the order benchmark.cpp runs them: the help text and the check.
  const std::vector<std::string> sections = {"startup",   "overhead",   "sweep",     "parallelism", "memory",
                                             "report",    "checkpoint", "precision", "nanogpt16",   "demo",
                                             "nonfinite", "population", "stacked",   "torchscript", "topk"};
  std::string names;
  for (const auto& name : sections) names += (names.empty() ? "" : ",") + name;
  app.add_option("--sections", o.sections, "comma-separated subset of " + names + " (default: all but population)")
      ->type_name("LIST")
      ->delimiter(',')
      ->check(CLI::IsMember(sections))
      ->group(what);
  app.add_option("--nodes", o.nodes, "node counts of the overhead table (default 1,4,16); repeatable")
      ->type_name("LIST")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->group(what);
  app.add_option("--max-nodes", o.max_nodes, "largest K of the node-count sweep (default 4096)")
      ->type_name("K")
      ->check(CLI::Range(1, 1 << 20))
      ->group(what);
  app.add_option("--repeat", o.repeat,
                 "run each overhead measurement N times, alternating simulator and bare loop, and report the "
                 "fastest of each (default 1; on a shared machine single runs vary by 10-50 %; --json keeps every "
                 "run)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20))
      ->group(what);
  const std::string io = "Input and output";
  app.add_option("--data", o.data_dir,
                 "folder holding mnist/ and shakespeare/ (default: the repository's examples/data)")
      ->type_name("DIR")
      ->group(io);
  app.add_option("--plugin-path", o.plugin_path, "where to look for plugins first")->type_name("DIR")->group(io);
  app.add_option("--json", o.json_file, "also write every measurement and target as JSON")
      ->type_name("FILE")
      ->group(io);
}

void finish_options(BenchOptions& o, const fs::path& default_data_dir) {
  if (o.data_dir.empty()) o.data_dir = default_data_dir;
  if (!fs::exists(o.data_dir / "mnist"))
    throw sdk::DataError(o.data_dir.string() + ": no mnist/ folder here (use --data)");
  if (!o.plugin_path.empty()) o.plugin_path = fs::absolute(o.plugin_path).string();
  // Found now, not after the measurements it would lose.
  if (!o.json_file.empty()) {
    const fs::path folder = fs::absolute(o.json_file).parent_path();
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
      throw sdk::ConfigError("--json", o.json_file + ": the folder " + folder.string() + " does not exist");
    }
    if (fs::is_directory(o.json_file, ec)) throw sdk::ConfigError("--json", o.json_file + " is a folder");
  }
}

}  // namespace exogym::bench
