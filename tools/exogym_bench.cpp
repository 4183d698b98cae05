// exogym-bench: how much does the simulator cost beyond the training compute?
//
// For each model and node count it trains the same work twice, each in a
// fresh child process (so that peak memory and start-up are measured alone):
// once with the simulator (an "allreduce" run, outputs and metering on) and
// once with a bare LibTorch loop (tools/bench/bare_loop.h). It prints a table,
// checks the performance targets, and writes everything as JSON.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bare_loop.h"
#include "exogym/runtime/cluster/cluster.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/cluster/malloc_tuning.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/train/training.h"
#include "exogym/runtime/manifest/units.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"

namespace fs = std::filesystem;
using nlohmann::json;
namespace rt = exogym::runtime;

namespace {

const char* kUsage = R"(usage: exogym-bench [options]

Measures the simulator against a bare LibTorch loop doing the same work, for
the models mlp, cnn and nanogpt (small, block 128) at K = 1, 4 and 16 nodes,
plus a node-count sweep (MLP DiLoCo) and a parallelism sweep, then checks the
performance targets. Every measurement runs in a fresh child process.

options:
  --quick             a few steps of small configurations: checks that the
                      harness works (used by ctest), not how fast anything is
  --json FILE         also write every measurement and target as JSON
  --models LIST       comma-separated subset of mlp,cnn,nanogpt
  --max-nodes K       largest K of the node-count sweep (default 1024)
  --nodes LIST        node counts of the overhead table (default 1,4,16)
  --sections LIST     comma-separated subset of overhead,sweep,parallelism,
                      memory (default: all)
  --repeat N          run each overhead measurement N times, alternating
                      simulator and bare loop, and report the fastest of
                      each (default 1; on a shared machine single runs
                      vary by 10-50 %; --json keeps every run)
  --data DIR          folder holding mnist/ and shakespeare/ (default: the
                      repository's examples/data)
  --plugin-path DIR   where to look for plugins first
  -h, --help          this text
)";

// ---- measurements in the child process -------------------------------------

// Seconds since this process started (from /proc: 10 ms resolution).
double process_age() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Field 22 (starttime) counts after the command name, which may hold spaces.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  const double start = std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  double uptime = 0;
  std::ifstream("/proc/uptime") >> uptime;
  return uptime - start;
}

double current_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

rt::plugin::PluginLoader make_loader(const json& spec) {
  std::vector<fs::path> paths;
  if (spec.contains("plugin_path")) paths.emplace_back(spec["plugin_path"].get<std::string>());
  return rt::plugin::PluginLoader(paths);
}

std::shared_ptr<const exogym::sdk::Dataset> load_dataset(const json& spec) {
  const json data = spec["data"];
  exogym::sdk::DatasetRequest request;
  request.path = data.value("path", "");
  request.split = "train";
  request.seed = 42;
  request.local_nodes = request.num_nodes = spec.value("nodes", 1);
  const std::string name = data["dataset"];
  auto specs = rt::data::builtin_dataset_options(name);
  if (!specs) throw std::runtime_error("the benchmark uses built-in datasets, not \"" + name + "\"");
  json options = exogym::sdk::validate_options(data.value("options", json::object()), *specs, "data.options");
  return rt::data::make_builtin_dataset(name, options, request);
}

// The simulator's choice of worker threads and intra-op threads (training.cpp).
std::pair<int, int> thread_layout(int nodes, int parallelism) {
  const int cores = rt::cluster::available_cores();
  const int p = parallelism > 0 ? parallelism : std::max(1, std::min(nodes, cores));
  return {p, std::max(1, cores / p)};
}

json child_simulator(const json& spec) {
  const double age_at_main = spec["age_at_main"];
  const double base_rss = current_rss_bytes();
  const fs::path dir = fs::temp_directory_path() / ("exogym-bench-" + std::to_string(getpid()));
  json manifest = {
      {"name", "bench"},
      {"seed", 42},
      {"nodes", spec["nodes"]},
      {"parallelism", spec.value("parallelism", 0)},
      {"model", {{"plugin", spec["model"]}, {"options", spec["model_options"]}}},
      {"strategy", {{"plugin", spec["strategy"]}, {"options", spec["strategy_options"]}}},
      {"data", {{"train", spec["data"]}}},
      {"train", {{"max_steps", spec["steps"]}, {"batch_size", spec["batch_size"]}}},
      {"output", {{"dir", dir.string()}, {"save_model", false}}},
  };
  auto set = rt::manifest::parse_manifest(manifest, dir, "bench");
  auto loader = make_loader(spec);
  rt::train::RunOptions options;
  options.progress = rt::output::Progress::Mode::Quiet;
  options.run_dir = dir / "run";
  const rt::train::RunResult r = rt::train::train_run(set.runs.at(0), loader, options);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return {{"loop_seconds", r.loop_seconds},
          {"startup_seconds", age_at_main + r.startup_seconds - r.dataset_seconds},
          // Before main: loading LibTorch and its static initialisers.
          {"libtorch_load_seconds", age_at_main},
          {"dataset_seconds", r.dataset_seconds},
          {"parameters", r.parameters},
          {"last_loss", r.last_train_loss},
          {"base_rss", base_rss},
          {"peak_rss", peak_rss_bytes()}};
}

json child_bare(const json& spec) {
  rt::cluster::tune_malloc_for_training(rt::cluster::available_cores());  // as the simulator: the same process configuration
  auto loader = make_loader(spec);
  auto plugin = loader.load("model", spec["model"].get<std::string>(), "model.plugin", fs::current_path());
  exogym::bench::BareLoopConfig config;
  config.model_plugin = plugin;
  config.model_options = plugin->validate(spec["model_options"], "model.options");
  config.data = load_dataset(spec);
  config.optimizer = spec["strategy_options"]["optimizer"];
  config.nodes = spec["nodes"];
  config.steps = spec["steps"];
  config.batch_size = spec["batch_size"];
  std::tie(config.workers, config.threads) = thread_layout(config.nodes, spec.value("parallelism", 0));
  const auto result = exogym::bench::run_bare_loop(config);
  return {{"loop_seconds", result.loop_seconds}, {"last_loss", result.last_loss}, {"peak_rss", peak_rss_bytes()}};
}

json child_dataset(const json& spec) {
  const double before = current_rss_bytes();
  auto data = load_dataset(spec);
  return {{"dataset_bytes", current_rss_bytes() - before}, {"examples", data->size()}};
}

// ---- the parent -----------------------------------------------------------

struct Harness {
  fs::path self;
  json common;  // plugin_path
  bool quick = false;
  int repeat = 1;
  std::vector<int> nodes;  // the overhead table's K; empty: the default
  std::vector<std::string> sections = {"overhead", "sweep", "parallelism", "memory"};
  bool wants(const std::string& section) const {
    return std::find(sections.begin(), sections.end(), section) != sections.end();
  }
};

// Of repeated timings, the fastest: other work on the machine (or on a
// virtual machine's host) only ever adds time, so the fastest run is the
// closest to what the code itself costs. Both loops get the same estimator.
double fastest(const std::vector<double>& values) { return *std::min_element(values.begin(), values.end()); }

// Runs one measurement in a fresh child process and returns its JSON.
json measure(const Harness& h, json spec) {
  for (auto& [key, value] : h.common.items()) spec[key] = value;
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const std::string arg = spec.dump();
    execl(h.self.c_str(), h.self.c_str(), "--child", arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  std::array<char, 4096> buffer;
  for (ssize_t n; (n = read(out[0], buffer.data(), buffer.size())) > 0;) text.append(buffer.data(), n);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto line = text.rfind("RESULT ");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line == std::string::npos) {
    std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exit status " + std::to_string(WEXITSTATUS(status));
    throw std::runtime_error("measurement " + spec.dump() + " failed (" + why + ")");
  }
  return json::parse(text.substr(line + 7));
}

struct ModelCase {
  std::string name;
  json model_options;
  json data;
  int64_t batch_size;
  int64_t tokens_per_example;  // 0: not a language model
  int64_t steps_full, steps_quick;
};

// Bytes of parameters + gradients + optimizer state per node (AdamW: 2 moments).
double state_bytes(int64_t parameters, int optimizer_tensors) { return 4.0 * parameters * (2 + optimizer_tensors); }

std::string fmt(double v, int digits = 2) {
  if (std::isnan(v)) return "-";
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) std::cout << "  ";
      std::cout << (i == 0 ? row[i] + std::string(width[i] - row[i].size(), ' ')
                           : std::string(width[i] - row[i].size(), ' ') + row[i]);
    }
    std::cout << '\n';
  };
  print_row(header);
  size_t total = 0;
  for (auto w : width) total += w + 2;
  std::cout << std::string(total - 2, '-') << '\n';
  for (const auto& row : rows) print_row(row);
  std::cout << std::endl;
}

int run_parent(const Harness& h, const std::vector<std::string>& models, int max_nodes, const fs::path& data_dir,
               const std::string& json_file) {
  const json adamw = {{"optimizer", {{"name", "adamw"}, {"lr", 1e-3}}}};
  const json mnist = {{"dataset", "mnist"}, {"path", (data_dir / "mnist").string()}};
  std::vector<ModelCase> cases;
  for (const auto& name : models) {
    if (name == "mlp") cases.push_back({"mlp", {{"hidden", {256}}}, mnist, 64, 0, 300, 5});
    if (name == "cnn") cases.push_back({"cnn", json::object(), mnist, 32, 0, 20, 2});
    if (name == "nanogpt") {
      cases.push_back({"nanogpt",
                       {{"size", "small"}, {"block_size", 128}, {"vocab_size", 66}},
                       {{"dataset", "text-char"},
                        {"path", (data_dir / "shakespeare" / "input.txt").string()},
                        {"options", {{"block_size", 128}}}},
                       16, 128, 40, 2});
    }
  }
  const std::vector<int> node_counts =
      !h.nodes.empty() ? h.nodes : h.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 4, 16};
  json report = {{"machine", {{"cores", rt::cluster::available_cores()}}}, {"quick", h.quick}};

  // 1. Simulator against the bare loop.
  std::vector<std::vector<std::string>> rows;
  json overhead = json::array();
  if (h.wants("overhead")) {
    std::cout << "Simulator (allreduce) against a bare LibTorch loop doing the same work";
    if (h.repeat > 1) std::cout << " (the fastest of " << h.repeat << " runs of each)";
    std::cout << "\n\n";
  }
  for (const auto& c : h.wants("overhead") ? cases : std::vector<ModelCase>{}) {
    for (int K : node_counts) {
      // Fewer steps for more nodes keeps every measurement a few seconds long.
      const int64_t steps = h.quick ? c.steps_quick : std::max<int64_t>(c.steps_quick, c.steps_full * 4 / std::max(4, K));
      json spec = {{"nodes", K},          {"steps", steps},          {"batch_size", c.batch_size},
                   {"model", c.name},     {"model_options", c.model_options}, {"data", c.data},
                   {"strategy", "allreduce"}, {"strategy_options", adamw}};
      // Alternating the two spreads slow phases of a noisy machine over both.
      std::vector<double> sim_runs, bare_runs, startups, loads;
      json sim, bare;
      for (int i = 0; i < h.repeat; ++i) {
        spec["kind"] = "simulator";
        sim = measure(h, spec);
        spec["kind"] = "bare";
        bare = measure(h, spec);
        sim_runs.push_back(sim["loop_seconds"]);
        bare_runs.push_back(bare["loop_seconds"]);
        startups.push_back(sim["startup_seconds"]);
        loads.push_back(sim["libtorch_load_seconds"]);
      }
      // The load time shown is the fastest start-up's own part.
      const size_t fastest_start = std::min_element(startups.begin(), startups.end()) - startups.begin();
      sim["startup_seconds"] = startups[fastest_start];
      sim["libtorch_load_seconds"] = loads[fastest_start];
      const double sim_s = fastest(sim_runs), bare_s = fastest(bare_runs);
      const double examples = static_cast<double>(K * c.batch_size * steps);
      const double ratio = sim_s / bare_s;
      const int64_t params = sim["parameters"];
      json row = {{"model", c.name},
                  {"nodes", K},
                  {"steps", steps},
                  {"steps_per_second", steps / sim_s},
                  {"examples_per_second", examples / sim_s},
                  {"tokens_per_second", c.tokens_per_example ? json(examples * c.tokens_per_example / sim_s) : json()},
                  {"bare_loop_seconds", bare_s},
                  {"simulator_loop_seconds", sim_s},
                  {"overhead_ratio", ratio},
                  {"startup_seconds", sim["startup_seconds"]},
                  {"simulator_runs_seconds", sim_runs},
                  {"bare_runs_seconds", bare_runs},
                  {"startup_runs_seconds", startups},
                  {"libtorch_load_seconds", sim["libtorch_load_seconds"]},
                  {"peak_rss_bytes", sim["peak_rss"]},
                  {"bare_peak_rss_bytes", bare["peak_rss"]},
                  {"parameters", params},
                  {"extra_bytes_per_node",
                   (sim["peak_rss"].get<double>() - bare["peak_rss"].get<double>()) / K}};
      overhead.push_back(row);
      rows.push_back({c.name, std::to_string(K), std::to_string(steps), fmt(steps / sim_s, 1),
                      fmt((c.tokens_per_example ? examples * c.tokens_per_example : examples) / sim_s, 0) +
                          (c.tokens_per_example ? " tok" : ""),
                      fmt(bare_s, 2), fmt(sim_s, 2), fmt(ratio, 3), fmt(sim["startup_seconds"], 2),
                      fmt(sim["libtorch_load_seconds"], 2),
                      rt::manifest::format_bytes(sim["peak_rss"]), rt::manifest::format_bytes(row["extra_bytes_per_node"].get<double>())});
    }
  }
  if (h.wants("overhead")) {
    print_table({"model", "K", "steps", "steps/s", "examples/s", "bare_s", "sim_s", "overhead", "startup_s",
                 "of_which_torch", "peak_rss", "extra/node"},
                rows);
    report["overhead"] = overhead;
  }

  // 2. Node-count sweep: MLP DiLoCo, as many nodes as fit.
  json diloco = {{"H", 10}, {"optimizer", {{"name", "adamw"}, {"lr", 1e-3}}}};
  double dataset_bytes = 0;
  if (h.wants("sweep") || h.wants("memory")) {
    dataset_bytes = measure(h, {{"kind", "dataset"}, {"data", mnist}})["dataset_bytes"];
    report["dataset_bytes"] = dataset_bytes;
  }
  if (h.wants("sweep")) std::cout << "Node-count sweep: MLP (784-256-10) DiLoCo, H = 10, AdamW inner\n\n";
  rows.clear();
  json sweep = json::array();
  std::vector<int> sweep_nodes;
  for (int K = 1; K <= max_nodes; K *= 4) sweep_nodes.push_back(K);
  if (!h.quick && sweep_nodes.back() != max_nodes) sweep_nodes.push_back(max_nodes);
  if (h.quick) sweep_nodes = {1, 4};
  if (!h.wants("sweep")) sweep_nodes.clear();
  for (int K : sweep_nodes) {
    const int64_t steps = h.quick ? 4 : 20;
    json spec = {{"kind", "simulator"},     {"nodes", K},         {"steps", steps},
                 {"batch_size", 32},        {"model", "mlp"},     {"model_options", {{"hidden", {256}}}},
                 {"data", mnist},           {"strategy", "diloco"}, {"strategy_options", diloco}};
    json sim = measure(h, spec);
    const double state = state_bytes(sim["parameters"], 2);
    const double per_node = (sim["peak_rss"].get<double>() - sim["base_rss"].get<double>() - dataset_bytes) / K;
    sweep.push_back({{"nodes", K},
                     {"steps", steps},
                     {"steps_per_second", steps / sim["loop_seconds"].get<double>()},
                     {"node_steps_per_second", K * steps / sim["loop_seconds"].get<double>()},
                     {"peak_rss_bytes", sim["peak_rss"]},
                     {"bytes_per_node", per_node},
                     {"bytes_per_node_beyond_state", per_node - state},
                     {"completed", true}});
    rows.push_back({std::to_string(K), fmt(steps / sim["loop_seconds"].get<double>(), 2),
                    fmt(K * steps / sim["loop_seconds"].get<double>(), 0), rt::manifest::format_bytes(sim["peak_rss"]),
                    rt::manifest::format_bytes(per_node), rt::manifest::format_bytes(per_node - state)});
  }
  if (h.wants("sweep")) {
    print_table({"K", "steps/s", "node-steps/s", "peak_rss", "rss/node", "beyond state/node"}, rows);
    report["node_sweep"] = sweep;
  }

  // 3. Parallelism sweep: K = 16 MLP DDP.
  if (h.wants("parallelism")) std::cout << "Parallelism sweep: 16 MLP nodes, allreduce\n\n";
  rows.clear();
  json parallel = json::array();
  const int par_nodes = h.quick ? 2 : 16;
  std::vector<int> parallelisms = h.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4, 16};
  if (!h.wants("parallelism")) parallelisms.clear();
  for (int P : parallelisms) {
    const int64_t steps = h.quick ? 4 : 60;
    json spec = {{"kind", "simulator"}, {"nodes", par_nodes}, {"steps", steps}, {"batch_size", 64},
                 {"model", "mlp"},      {"model_options", {{"hidden", {256}}}}, {"data", mnist},
                 {"strategy", "allreduce"}, {"strategy_options", adamw}, {"parallelism", P}};
    json sim = measure(h, spec);
    const auto [workers, threads] = thread_layout(par_nodes, P);
    parallel.push_back({{"parallelism", P},
                        {"threads_per_node", threads},
                        {"steps_per_second", steps / sim["loop_seconds"].get<double>()}});
    rows.push_back({std::to_string(P), std::to_string(threads), fmt(steps / sim["loop_seconds"].get<double>(), 2)});
  }
  if (h.wants("parallelism")) {
    print_table({"parallelism", "threads/node", "steps/s"}, rows);
    report["parallelism_sweep"] = parallel;
  }

  // 4. Targets.
  json targets = json::array();
  auto target = [&](const std::string& what, double value, double limit, bool ok, const std::string& shown) {
    targets.push_back({{"target", what}, {"value", value}, {"limit", limit}, {"met", ok}});
    std::cout << (ok ? "  met     " : "  MISSED  ") << what << ": " << shown << '\n';
  };
  std::cout << "Targets" << (h.quick ? " (quick mode: indicative only)" : "") << "\n\n";
  for (const auto& row : overhead) {
    if (row["nodes"] != (h.quick ? 2 : 4)) continue;
    const double limit = row["model"] == "mlp" ? 1.15 : 1.05;
    const double ratio = row["overhead_ratio"];
    target("overhead " + row["model"].get<std::string>() + " K=" + std::to_string(row["nodes"].get<int>()), ratio,
           limit, ratio <= limit, fmt(ratio, 3) + " <= " + fmt(limit, 2));
  }
  if (!overhead.empty()) {
    double worst_startup = 0, its_load = 0;
    for (const auto& row : overhead) {
      if (row["startup_seconds"].get<double>() < worst_startup) continue;
      worst_startup = row["startup_seconds"];
      its_load = row["libtorch_load_seconds"];
    }
    target("start-up to the first step (datasets excluded)", worst_startup, 1.0, worst_startup < 1.0,
           fmt(worst_startup, 2) + " s < 1 s (of which " + fmt(its_load, 2) + " s loading LibTorch)");
  }
  if (!h.quick && h.wants("memory")) {
    json spec = {{"kind", "simulator"},     {"nodes", 64},    {"steps", 10},
                 {"batch_size", 64},        {"model", "mlp"}, {"model_options", {{"hidden", {256}}}},
                 {"data", mnist},           {"strategy", "allreduce"}, {"strategy_options", adamw}};
    json sim = measure(h, spec);
    const double limit = 1.2 * (dataset_bytes + 64 * state_bytes(sim["parameters"], 2)) + 300e6;
    const double peak = sim["peak_rss"];
    target("memory at K=64 MLP nodes", peak, limit, peak <= limit,
           rt::manifest::format_bytes(peak) + " <= " + rt::manifest::format_bytes(limit));
  }
  if (!h.quick && h.wants("sweep")) {
    const bool k1024 = std::any_of(sweep.begin(), sweep.end(), [](const json& r) { return r["nodes"] == 1024; });
    target("K=1024 MLP DiLoCo nodes run to completion", k1024 ? 1 : 0, 1, k1024,
           k1024 ? "completed" : "not run (--max-nodes below 1024)");
  }
  report["targets"] = targets;
  if (!json_file.empty()) {
    std::ofstream(json_file) << report.dump(2) << '\n';
    std::cout << "\nwrote " << json_file << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double age_at_main = process_age();
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "--child") {
      spdlog::set_level(spdlog::level::warn);
      json spec = json::parse(args[1]);
      spec["age_at_main"] = age_at_main;
      const std::string kind = spec["kind"];
      json result = kind == "simulator" ? child_simulator(spec) : kind == "bare" ? child_bare(spec) : child_dataset(spec);
      std::cout << "RESULT " << result.dump() << std::endl;
      return 0;
    }
    Harness h;
    h.self = fs::canonical("/proc/self/exe");
    std::string json_file;
    std::vector<std::string> models = {"mlp", "cnn", "nanogpt"};
    int max_nodes = 1024;
    fs::path data_dir = fs::path(EXOGYM_SOURCE_DIR) / "examples" / "data";
    for (size_t i = 0; i < args.size(); ++i) {
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw std::runtime_error(args[i] + " needs a value");
        return args[++i];
      };
      if (args[i] == "-h" || args[i] == "--help") {
        std::cout << kUsage;
        return 0;
      } else if (args[i] == "--quick") {
        h.quick = true;
      } else if (args[i] == "--json") {
        json_file = value();
      } else if (args[i] == "--models") {
        models.clear();
        std::stringstream list(value());
        for (std::string m; std::getline(list, m, ',');) {
          if (m != "mlp" && m != "cnn" && m != "nanogpt")
            throw std::runtime_error("--models: unknown model \"" + m + "\" (mlp, cnn, nanogpt)");
          models.push_back(m);
        }
      } else if (args[i] == "--max-nodes") {
        max_nodes = std::stoi(value());
        if (max_nodes < 1) throw std::runtime_error("--max-nodes must be positive");
      } else if (args[i] == "--sections") {
        h.sections.clear();
        std::stringstream list(value());
        for (std::string section; std::getline(list, section, ',');) {
          if (section != "overhead" && section != "sweep" && section != "parallelism" && section != "memory")
            throw std::runtime_error("--sections: unknown section \"" + section +
                                     "\" (overhead, sweep, parallelism, memory)");
          h.sections.push_back(section);
        }
      } else if (args[i] == "--nodes") {
        std::stringstream list(value());
        for (std::string k; std::getline(list, k, ',');) {
          const int K = std::atoi(k.c_str());
          if (K < 1) throw std::runtime_error("--nodes: \"" + k + "\" is not a positive node count");
          h.nodes.push_back(K);
        }
      } else if (args[i] == "--repeat") {
        h.repeat = std::stoi(value());
        if (h.repeat < 1) throw std::runtime_error("--repeat must be positive");
      } else if (args[i] == "--data") {
        data_dir = value();
      } else if (args[i] == "--plugin-path") {
        h.common["plugin_path"] = fs::absolute(value()).string();
      } else {
        throw std::runtime_error("unknown argument \"" + args[i] + "\" (see --help)");
      }
    }
    if (!fs::exists(data_dir / "mnist"))
      throw std::runtime_error(data_dir.string() + ": no mnist/ folder here (use --data)");
    return run_parent(h, models, max_nodes, data_dir, json_file);
  } catch (const std::exception& e) {
    std::cerr << "exogym-bench: " << e.what() << std::endl;
    return 1;
  }
}
