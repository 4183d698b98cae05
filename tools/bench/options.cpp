#include "bench/options.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace exogym::bench {

namespace fs = std::filesystem;

const char* const kUsage = R"(usage: exogym-bench [options]

Measures the simulator against a bare LibTorch loop doing the same work, for
the models mlp, cnn and nanogpt (small, block 128) at K = 1, 4 and 16 nodes,
plus a node-count sweep (MLP DiLoCo), a parallelism sweep and the cost of
checkpoints, then checks the performance targets. Every measurement runs in a fresh child process.

options:
  --quick             a few steps of small configurations: checks that the
                      harness works (used by ctest), not how fast anything is
  --json FILE         also write every measurement and target as JSON
  --models LIST       comma-separated subset of mlp,cnn,nanogpt
  --max-nodes K       largest K of the node-count sweep (default 1024)
  --nodes LIST        node counts of the overhead table (default 1,4,16)
  --sections LIST     comma-separated subset of overhead,sweep,parallelism,
                      memory,report,checkpoint (default: all)
  --repeat N          run each overhead measurement N times, alternating
                      simulator and bare loop, and report the fastest of
                      each (default 1; on a shared machine single runs
                      vary by 10-50 %; --json keeps every run)
  --data DIR          folder holding mnist/ and shakespeare/ (default: the
                      repository's examples/data)
  --plugin-path DIR   where to look for plugins first
  -h, --help          this text
)";

namespace {

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');) items.push_back(item);
  return items;
}

// Each of `list` if it is one of `known`; `what` names the option in errors.
std::vector<std::string> choose(const std::string& list, const std::vector<std::string>& known, const std::string& flag,
                                const std::string& what) {
  std::string names;
  for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
  std::vector<std::string> chosen = split_list(list);
  for (const auto& item : chosen) {
    if (std::find(known.begin(), known.end(), item) == known.end())
      throw std::runtime_error(flag + ": unknown " + what + " \"" + item + "\" (" + names + ")");
  }
  return chosen;
}

std::vector<int> node_counts(const std::string& list) {
  std::vector<int> counts;
  for (const auto& k : split_list(list)) {
    const int K = std::atoi(k.c_str());
    if (K < 1) throw std::runtime_error("--nodes: \"" + k + "\" is not a positive node count");
    counts.push_back(K);
  }
  return counts;
}

int positive(const std::string& value, const std::string& flag) {
  const int n = std::stoi(value);
  if (n < 1) throw std::runtime_error(flag + " must be positive");
  return n;
}

}  // namespace

bool BenchOptions::wants(const std::string& section) const {
  return std::find(sections.begin(), sections.end(), section) != sections.end();
}

BenchOptions parse_options(const std::vector<std::string>& args, const fs::path& default_data_dir) {
  BenchOptions o;
  o.data_dir = default_data_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::runtime_error(flag + " needs a value");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      return o;
    } else if (flag == "--quick") {
      o.quick = true;
    } else if (flag == "--json") {
      o.json_file = value();
    } else if (flag == "--models") {
      o.models = choose(value(), {"mlp", "cnn", "nanogpt"}, flag, "model");
    } else if (flag == "--max-nodes") {
      o.max_nodes = positive(value(), flag);
    } else if (flag == "--sections") {
      o.sections =
          choose(value(), {"overhead", "sweep", "parallelism", "memory", "report", "checkpoint"}, flag, "section");
    } else if (flag == "--nodes") {
      const std::vector<int> counts = node_counts(value());
      o.nodes.insert(o.nodes.end(), counts.begin(), counts.end());
    } else if (flag == "--repeat") {
      o.repeat = positive(value(), flag);
    } else if (flag == "--data") {
      o.data_dir = value();
    } else if (flag == "--plugin-path") {
      o.plugin_path = fs::absolute(value()).string();
    } else {
      throw std::runtime_error("unknown argument \"" + flag + "\" (see --help)");
    }
  }
  if (!fs::exists(o.data_dir / "mnist"))
    throw std::runtime_error(o.data_dir.string() + ": no mnist/ folder here (use --data)");
  return o;
}

}  // namespace exogym::bench
