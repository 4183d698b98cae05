#pragma once
// exogym-bench's command line.
#include <filesystem>
#include <string>
#include <vector>

namespace exogym::bench {

extern const char* const kUsage;

struct BenchOptions {
  bool help = false;
  // A few steps of small configurations: checks that the harness works, not
  // how fast anything is.
  bool quick = false;
  int repeat = 1;          // runs of each overhead measurement
  std::vector<int> nodes;  // the overhead table's node counts; empty: the default
  std::vector<std::string> sections = {"overhead", "sweep", "parallelism", "memory", "report", "checkpoint"};
  std::vector<std::string> models = {"mlp", "cnn", "nanogpt"};
  int max_nodes = 1024;  // the node-count sweep's largest K
  std::filesystem::path data_dir;
  std::string json_file;    // empty: no JSON
  std::string plugin_path;  // absolute; empty: the default search

  bool wants(const std::string& section) const;
};

// Throws std::runtime_error naming the argument at fault.
BenchOptions parse_options(const std::vector<std::string>& args, const std::filesystem::path& default_data_dir);

}  // namespace exogym::bench
