#pragma once
// exogym-bench's command line, on the flags every tool shares
// (tools/cli/tool.h).
#include <filesystem>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace exogym::bench {

struct BenchOptions {
  // A few steps of small configurations: checks that the harness works, not
  // how fast anything is.
  bool quick = false;
  int repeat = 1;          // runs of each overhead measurement
  std::vector<int> nodes;  // the overhead table's node counts; empty: the default
  std::vector<std::string> sections = {"startup",   "overhead",   "sweep",       "parallelism", "memory",
                                       "report",    "checkpoint", "precision",   "nanogpt16",   "demo",
                                       "nonfinite", "stacked",    "torchscript", "topk"};
  std::vector<std::string> models = {"mlp", "cnn", "nanogpt"};
  int max_nodes = 4096;  // the node-count sweep's largest K
  std::filesystem::path data_dir;
  std::string json_file;    // empty: no JSON
  std::string plugin_path;  // absolute; empty: the default search

  bool wants(const std::string& section) const;
};

// What the benchmark does, the first lines of --help.
extern const char* const kDescription;

// Declares exogym-bench's flags on `app`, each writing into `options`; a
// value CLI11 refuses (an unknown model or section, a count below 1) is a
// usage error naming the flag.
void add_options(CLI::App& app, BenchOptions& options);

// After parsing: the data folder (`default_data_dir` unless --data gave
// one) must hold mnist/, else an sdk::DataError naming it; --plugin-path
// becomes absolute.
void finish_options(BenchOptions& options, const std::filesystem::path& default_data_dir);

}  // namespace exogym::bench
