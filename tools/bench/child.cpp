#include "bench/child.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "bench/bare_loop.h"
#include "bench/harness.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/host/block_cache.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/host/malloc_tuning.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/divergence.h"
#include "exogym/runtime/train/training.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::bench {

namespace fs = std::filesystem;
namespace rt = exogym::runtime;
using nlohmann::json;

namespace {

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

json simulator_manifest(const json& spec, const fs::path& dir) {
  json manifest = {
      {"name", "bench"},
      {"seed", 42},
      {"nodes", spec["nodes"]},
      {"parallelism", spec.value("parallelism", 0)},
      {"precision", spec.value("precision", "fp32")},
      {"execution", spec.value("execution", "auto")},
      {"model", {{"plugin", spec["model"]}, {"options", spec["model_options"]}}},
      {"strategy", {{"plugin", spec["strategy"]}, {"options", spec["strategy_options"]}}},
      {"data", {{"train", spec["data"]}}},
      {"train", {{"max_steps", spec["steps"]}, {"batch_size", spec["batch_size"]}}},
      {"output", {{"dir", dir.string()}, {"save_model", false}}},
      {"checkpoint", {{"interval", spec.value("checkpoint_interval", 0)}}},
  };
  if (spec.contains("participation")) manifest["participation"] = spec["participation"];
  return manifest;
}

json child_simulator(const json& spec, double age_at_main) {
  const double base_rss = current_rss_bytes();
  const fs::path dir = fs::temp_directory_path() / ("exogym-bench-" + std::to_string(getpid()));
  auto set = rt::manifest::parse_manifest(simulator_manifest(spec, dir), dir, "bench");
  auto loader = make_loader(spec);
  rt::train::TrainingOptions options;
  options.progress = rt::output::Progress::Mode::Quiet;
  options.run_dir = dir / "run";
  options.timing_mark_step = spec.value("mark_step", int64_t{-1});
  const rt::train::TrainingResult r = rt::train::train_run(set.runs.at(0), loader, options);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return {{"loop_seconds", r.loop_seconds},
          {"after_mark_seconds", r.after_mark_seconds},
          {"startup_seconds", age_at_main + r.startup_seconds - r.dataset_seconds},
          // Before main: loading LibTorch and its static initialisers.
          {"libtorch_load_seconds", age_at_main},
          {"dataset_seconds", r.dataset_seconds},
          {"parameters", r.parameters},
          {"last_loss", r.last_train_loss},
          {"checkpoints", r.checkpoints},
          {"checkpoint_seconds", r.checkpoint_seconds},
          {"checkpoint_bytes", r.checkpoint_bytes},
          {"base_rss", base_rss},
          {"peak_rss", peak_rss_bytes()}};
}

json child_bare(const json& spec) {
  const double base_rss = current_rss_bytes();
  // As the simulator: the same process configuration.
  rt::host::tune_malloc_for_training(rt::host::available_cores());
  rt::host::install_block_cache();
  auto loader = make_loader(spec);
  auto plugin = loader.load("model", spec["model"].get<std::string>(), "model.plugin", fs::current_path());
  BareLoopConfig config;
  config.model_plugin = plugin;
  config.model_options = plugin->validate(spec["model_options"], "model.options");
  config.data = load_dataset(spec);
  const json& strategy_options = spec["strategy_options"];
  config.optimizer = strategy_options["optimizer"];
  if (spec["strategy"] == "diloco") {
    config.diloco_H = strategy_options.at("H");
    config.outer_optimizer = strategy_options.value("outer_optimizer", json());
  } else if (spec["strategy"] != "allreduce") {
    throw std::runtime_error("the bare loop does allreduce or diloco, not " + spec["strategy"].dump());
  }
  config.nodes = spec["nodes"];
  config.steps = spec["steps"];
  config.batch_size = spec["batch_size"];
  config.mark_step = spec.value("mark_step", int64_t{-1});
  const auto threads = simulator_threads(config.nodes, spec.value("parallelism", 0));
  config.workers = threads.parallelism;
  config.threads = threads.threads;
  const auto result = run_bare_loop(config);
  return {{"loop_seconds", result.loop_seconds},
          {"after_mark_seconds", result.after_mark_seconds},
          {"last_loss", result.last_loss},
          {"base_rss", base_rss},
          {"peak_rss", peak_rss_bytes()}};
}

// The parameters' pass of train.on_nonfinite (divergence.h) on one replica
// of the model: the fastest of many, in seconds.
json child_nonfinite(const json& spec) {
  auto loader = make_loader(spec);
  auto plugin = loader.load("model", spec["model"].get<std::string>(), "model.plugin", fs::current_path());
  const auto model = plugin->create_model(plugin->validate(spec["model_options"], "model.options"));
  model->init_parameters();
  const std::vector<at::Tensor> parameters = model->network().parameters();
  std::vector<double> seconds;
  for (int i = 0; i < 200; ++i) {
    const auto started = std::chrono::steady_clock::now();
    if (rt::train::first_nonfinite(parameters) >= 0) throw std::runtime_error("a fresh model is not finite");
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return {{"check_seconds", fastest(seconds)}};
}

json child_dataset(const json& spec) {
  const double before = current_rss_bytes();
  auto data = load_dataset(spec);
  return {{"dataset_bytes", current_rss_bytes() - before}, {"examples", data->size()}};
}

}  // namespace

runtime::plugin::PluginLoader make_loader(const json& spec) {
  std::vector<fs::path> paths;
  if (spec.contains("plugin_path")) paths.emplace_back(spec["plugin_path"].get<std::string>());
  return rt::plugin::PluginLoader(paths);
}

std::shared_ptr<const sdk::Dataset> load_dataset(const json& spec) {
  const json data = spec["data"];
  sdk::DatasetRequest request;
  request.path = data.value("path", "");
  request.split = "train";
  request.seed = 42;
  request.local_nodes = request.num_nodes = spec.value("nodes", 1);
  const std::string name = data["dataset"];
  auto specs = rt::data::builtin_dataset_options(name);
  if (!specs) throw std::runtime_error("the benchmark uses built-in datasets, not \"" + name + "\"");
  json options = sdk::validate_options(data.value("options", json::object()), *specs, "data.options");
  return rt::data::make_builtin_dataset(name, options, request);
}

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

int run_child(const std::string& spec_text, double age_at_main) {
  spdlog::set_level(spdlog::level::warn);
  const json spec = json::parse(spec_text);
  const std::string kind = spec["kind"];
  const json result = kind == "simulator"   ? child_simulator(spec, age_at_main)
                      : kind == "bare"      ? child_bare(spec)
                      : kind == "nonfinite" ? child_nonfinite(spec)
                      : kind == "demo"      ? child_demo(spec)
                                            : child_dataset(spec);
  std::cout << kResultPrefix << result.dump() << std::endl;
  return 0;
}

}  // namespace exogym::bench
