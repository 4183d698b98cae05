#include "exogym/runtime/manifest/reader.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "exogym/runtime/manifest/participation_section.h"
#include "exogym/runtime/manifest/schema.h"
#include "exogym/runtime/manifest/syntax.h"
#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/sim/node_factors.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::ConfigError;

// Each reader below takes its section already validated, every declared
// default filled in, and completes it where the schema cannot: defaults
// taken from other keys and absolute paths, so that the section is the one
// written to config.json.
namespace {

fs::path resolve_path(const fs::path& base_dir, const std::string& text) {
  fs::path path(text);
  if (path.is_relative()) path = base_dir / path;
  path = path.lexically_normal();
  // "runs/" and "runs" are the same folder; keep one spelling.
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}

std::string read_name(const json& top, const std::string& default_name) {
  if (top.contains("name")) {
    check_folder_name(top.at("name"), "name");
    return top.at("name");
  }
  if (default_name.empty()) throw ConfigError("name", "not set, and there is no manifest file to name the run after");
  if (!is_folder_name(default_name)) {
    throw ConfigError("name", "not set, and the manifest file's name " + sdk::json_excerpt(default_name) +
                                  " is not a " + kFolderNameNoun + "; set \"name\"");
  }
  return default_name;
}

PluginRef read_plugin(const json& section, const std::string& path) {
  PluginRef ref;
  ref.plugin = section.at("plugin").get<std::string>();
  ref.options = section.at("options");
  ref.path = path;
  return ref;
}

data::PartitionSpec read_partition(const json& value, const std::string& path, int nodes) {
  using Kind = data::PartitionSpec::Kind;
  data::PartitionSpec spec;
  spec.json_path = path;
  const std::string name = value.is_string() ? value.get<std::string>() : value.at("name").get<std::string>();
  if (name == "contiguous") spec.kind = Kind::Contiguous;
  if (name == "dirichlet") {
    spec.kind = Kind::Dirichlet;
    spec.alpha = value.at("alpha");
  }
  if (name == "shards") {
    spec.kind = Kind::Shards;
    spec.shards_per_node = value.at("shards_per_node");
  }
  if (name == "labels") {
    spec.kind = Kind::Labels;
    for (const auto& item : value.at("nodes").items()) {
      const std::string node_path = path + ".nodes." + item.key();
      const int node = node_rank(item.key(), node_path, nodes);
      if (item.value().empty()) throw ConfigError(node_path, "an empty list leaves the node without any example");
      spec.node_labels[node] = item.value().get<std::vector<int64_t>>();
    }
    for (int r = 0; r < nodes; ++r) {
      if (spec.node_labels.count(r)) continue;
      throw ConfigError(path + ".nodes", "node " + std::to_string(r) +
                                             " has no labels: list the labels of every node, " +
                                             (nodes == 1 ? "\"0\"" : "\"0\" to \"" + std::to_string(nodes - 1) + "\""));
    }
  }
  return spec;
}

DataSpec read_data(json& section, const std::string& path, const fs::path& base_dir, int nodes) {
  DataSpec spec;
  spec.json_path = path;
  spec.dataset = section.at("dataset");
  if (section.contains("path")) {
    spec.path = resolve_path(base_dir, section.at("path"));
    section["path"] = spec.path.string();
  }
  spec.split = section.at("split");
  // Validation data is not sharded, but its partition is still validated:
  // a bad value is a typo worth reporting rather than ignoring.
  spec.partition = read_partition(section.at("partition"), path + ".partition", nodes);
  spec.options = section.at("options");
  return spec;
}

void read_train(json& train, Manifest& m) {
  m.max_steps = train.at("max_steps");
  m.batch_size = train.at("batch_size");
  if (!train.contains("minibatch_size")) train["minibatch_size"] = m.batch_size;
  m.minibatch_size = train.at("minibatch_size");
  m.stop_on_nonfinite = train.at("on_nonfinite") == "stop";
  if (m.batch_size % m.minibatch_size != 0) {
    throw ConfigError("train.minibatch_size", "must divide train.batch_size (" + std::to_string(m.batch_size) +
                                                  ") exactly, got " + std::to_string(m.minibatch_size));
  }
}

void read_eval(json& eval, Manifest& m) {
  m.eval_interval = eval.at("interval");
  // Without validation data there is nothing to evaluate; the resolved
  // manifest says so rather than promising evaluations that never come.
  if (!m.val_data) eval["size"] = 0;
  m.eval_size = eval.at("size");
  if (!eval.contains("batch_size")) eval["batch_size"] = m.minibatch_size;
  m.eval_batch_size = eval.at("batch_size");
  if (eval.contains("target_loss")) {
    m.target_loss = eval.at("target_loss").get<double>();
    if (m.eval_size == 0)
      throw ConfigError("eval.target_loss", "needs evaluation: set data.val and a positive eval.size");
  }
}

// The link a section describes; keys it leaves out keep `link`'s values.
sim::Link read_link(const json& section, const std::string& path, sim::Link link) {
  if (section.contains("bandwidth"))
    link.bandwidth = util::parse_bandwidth(section.at("bandwidth"), path + ".bandwidth");
  if (section.contains("latency")) link.latency = util::parse_duration(section.at("latency"), path + ".latency");
  return link;
}

NetworkSpec read_network(const json& network, int nodes, uint64_t seed) {
  NetworkSpec spec;
  spec.link = read_link(network, "network", {});
  spec.failure_timeout = util::parse_duration(network.at("failure_timeout"), "network.failure_timeout");
  std::set<int> listed_bandwidth;
  if (network.contains("nodes")) {
    for (const auto& item : network.at("nodes").items()) {
      const std::string path = "network.nodes." + item.key();
      const int node = node_rank(item.key(), path, nodes);
      spec.per_node[node] = read_link(item.value(), path, spec.link);
      if (item.value().contains("bandwidth")) listed_bandwidth.insert(node);
    }
  }
  if (network.contains("bandwidth_distribution")) {
    const auto d =
        sim::read_factor_distribution(network.at("bandwidth_distribution"), "network.bandwidth_distribution");
    for (int r = 0; r < nodes; ++r) {
      if (listed_bandwidth.count(r)) continue;
      auto it = spec.per_node.try_emplace(r, spec.link).first;
      it->second.bandwidth = spec.link.bandwidth * sim::draw_factor(d, sim::NodeFactor::Bandwidth, seed, r);
    }
    spec.bandwidth_distribution = d;
  }
  return spec;
}

ComputeSpec read_compute(const json& compute, int nodes, uint64_t seed) {
  ComputeSpec spec;
  const std::string step_time = compute.at("step_time");
  if (step_time != "measured") {
    spec.step_time = util::parse_duration(step_time, "compute.step_time");
    if (*spec.step_time <= 0) {
      throw ConfigError("compute.step_time",
                        "expected \"measured\" or a positive duration, got " + sdk::json_excerpt(step_time));
    }
  }
  if (compute.contains("speed")) {
    for (const auto& item : compute.at("speed").items())
      spec.speed[node_rank(item.key(), "compute.speed." + item.key(), nodes)] = item.value();
  }
  if (compute.contains("speed_distribution")) {
    const auto d = sim::read_factor_distribution(compute.at("speed_distribution"), "compute.speed_distribution");
    for (int r = 0; r < nodes; ++r) spec.speed.try_emplace(r, sim::draw_factor(d, sim::NodeFactor::Speed, seed, r));
    spec.speed_distribution = d;
  }
  return spec;
}

std::vector<sim::NodeFault> read_faults(const json& faults) {
  std::vector<sim::NodeFault> out;
  for (size_t i = 0; i < faults.size(); ++i) {
    const json& entry = faults[i];
    sim::NodeFault f;
    f.path = "faults[" + std::to_string(i) + "]";
    f.node = entry.at("node");
    if (entry.contains("fail_at")) f.fail_at = entry.at("fail_at").get<int64_t>();
    if (entry.contains("rejoin_at")) f.rejoin_at = entry.at("rejoin_at").get<int64_t>();
    if (entry.contains("join_at")) f.join_at = entry.at("join_at").get<int64_t>();
    out.push_back(f);
  }
  return out;
}

std::vector<sim::AdversarySpec> read_adversaries(const json& entries, int nodes) {
  std::vector<sim::AdversarySpec> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const json& entry = entries[i];
    sim::AdversarySpec a;
    a.path = "adversaries[" + std::to_string(i) + "]";
    a.node = entry.at("node");
    if (a.node >= nodes) {
      throw ConfigError(a.path + ".node",
                        "node " + std::to_string(a.node) + " is not in a run of " + std::to_string(nodes) + " nodes");
    }
    const std::string attack = entry.at("attack");
    for (auto kind : {sim::Attack::SignFlip, sim::Attack::Noise, sim::Attack::Constant}) {
      if (attack == sim::to_string(kind)) a.attack = kind;
    }
    a.scale = entry.at("scale");
    a.from_step = entry.at("from_step");
    if (entry.contains("until_step") && !entry.at("until_step").is_null()) {
      a.until_step = entry.at("until_step").get<int64_t>();
      if (*a.until_step <= a.from_step) {
        throw ConfigError(a.path + ".until_step", "expected a step after from_step (" + std::to_string(a.from_step) +
                                                      "), got " + std::to_string(*a.until_step));
      }
    }
    out.push_back(a);
  }
  return out;
}

// Both durations in steps, or both on the simulated clock, which then
// needs a fixed compute time to be reproducible.
sim::ChurnSpec read_churn(const json& churn, const ComputeSpec& compute) {
  sim::ChurnSpec spec;
  const std::string mtbf = churn.at("mtbf"), downtime = churn.at("downtime");
  spec.timed = !util::counts_steps(mtbf);
  if (util::counts_steps(downtime) == spec.timed) {
    throw ConfigError("churn",
                      "give mtbf and downtime both in steps (\"500 steps\") or both as durations (\"2h\"), "
                      "got " +
                          sdk::json_excerpt(mtbf) + " and " + sdk::json_excerpt(downtime));
  }
  if (!spec.timed) {
    spec.mtbf = util::parse_steps(mtbf, "churn.mtbf");
    spec.downtime = util::parse_steps(downtime, "churn.downtime");
    if (spec.downtime != std::floor(spec.downtime)) {
      throw ConfigError("churn.downtime", "expected a whole number of steps, got " + sdk::json_excerpt(downtime));
    }
    return spec;
  }
  spec.mtbf = util::parse_duration(mtbf, "churn.mtbf");
  spec.downtime = util::parse_duration(downtime, "churn.downtime");
  for (const auto& [value, key] : {std::pair<double, const char*>{spec.mtbf, "mtbf"}, {spec.downtime, "downtime"}}) {
    if (!(value > 0))
      throw ConfigError(std::string("churn.") + key,
                        "expected a positive duration, got " + sdk::json_excerpt(churn.at(key)));
  }
  if (!compute.step_time) {
    throw ConfigError("churn",
                      "failures on the simulated clock need a fixed compute.step_time (such as \"50ms\"): "
                      "with measured compute the clock, and so the failures, would change from run to run");
  }
  // Each step draws every failure the clock went past (timed_churn.h): an
  // mtbf far below a step would draw millions per step and the run would
  // crawl for hours, so an mtbf shorter than the fastest node's step is
  // refused (with it every node would fail within every step anyway).
  double fastest = 1;
  for (const auto& [node, speed] : compute.speed) fastest = std::max(fastest, speed);
  const double step = *compute.step_time / fastest;
  if (spec.mtbf < step) {
    throw ConfigError("churn.mtbf", sdk::json_excerpt(mtbf) + " is shorter than one step of the fastest node (" +
                                        util::format_duration(step) + ", from compute.step_time" +
                                        (fastest > 1 ? " and compute.speed" : "") +
                                        "): every node would fail within every step; give at least " +
                                        util::format_duration(step));
  }
  return spec;
}

}  // namespace

Manifest read_run(const json& doc, const fs::path& base_dir, const std::string& default_name,
                  const std::string& variant) {
  if (!doc.is_object()) throw ConfigError("", "a manifest must be a JSON object, got " + sdk::json_excerpt(doc));
  json top = sdk::validate_options(doc, manifest_schema(), "", sdk::Unset::Omit);
  Manifest m;
  m.variant = variant;
  m.base_dir = base_dir;
  m.name = read_name(top, default_name);
  top["name"] = m.name;
  m.seed = top.at("seed");
  m.nodes = top.at("nodes");
  m.device = top.at("device");
  if (auto problem = device_problem(m.device)) throw ConfigError("device", *problem);
  m.precision = top.at("precision") == "bf16" ? Precision::Bf16 : Precision::Fp32;
  const std::string execution = top.at("execution");
  m.execution = execution == "stacked"    ? Execution::Stacked
                : execution == "per_node" ? Execution::PerNode
                                          : Execution::Auto;
  m.parallelism = top.at("parallelism");
  // More compute slots than nodes are never used; a huge number is a typo.
  if (m.parallelism > m.nodes) {
    throw ConfigError("parallelism", std::to_string(m.parallelism) + " nodes computing at once, but the run has " +
                                         std::to_string(m.nodes) + " nodes; at most nodes (0: automatic)");
  }
  m.threads = top.at("threads");
  m.pin_threads = top.at("pin_threads");
  m.model = read_plugin(top.at("model"), "model");
  m.strategy = read_plugin(top.at("strategy"), "strategy");
  json& data = top.at("data");
  m.train_data = read_data(data.at("train"), "data.train", base_dir, m.nodes);
  if (data.contains("val")) m.val_data = read_data(data.at("val"), "data.val", base_dir, m.nodes);
  read_train(top.at("train"), m);
  read_eval(top.at("eval"), m);
  m.network = read_network(top.at("network"), m.nodes, m.seed);
  m.compute = read_compute(top.at("compute"), m.nodes, m.seed);
  if (top.contains("faults")) m.faults = read_faults(top.at("faults"));
  if (top.contains("churn")) m.churn = read_churn(top.at("churn"), m.compute);
  if (top.contains("adversaries")) m.adversaries = read_adversaries(top.at("adversaries"), m.nodes);
  if (top.contains("participation")) {
    json& participation = top.at("participation");
    if (participation.contains("trace"))
      participation["trace"] = resolve_path(base_dir, participation.at("trace")).string();
    m.participation = read_participation(participation, m.nodes, m.compute);
  }
  if (m.has_population()) check_population(top, m);
  // The schedule's own checks (a node down twice at once, nobody alive, ...).
  if (m.has_faults()) sim::FaultSchedule{m.failure_spec()};
  if (m.participation && m.participation->trace)
    check_trace_start(m, top.at("participation").at("trace").get<std::string>());
  m.checkpoint.interval = top.at("checkpoint").at("interval");
  m.checkpoint.keep = top.at("checkpoint").at("keep");
  json& output = top.at("output");
  m.output_dir = resolve_path(base_dir, output.at("dir"));
  output["dir"] = m.output_dir.string();
  const json& save_model = output.at("save_model");
  if (save_model.is_boolean())
    m.model_formats = save_model.get<bool>() ? model_file_formats() : std::vector<std::string>{};
  else
    m.model_formats = save_model.get<std::vector<std::string>>();
  m.resolved = std::move(top);
  return m;
}

}  // namespace exogym::runtime::manifest
