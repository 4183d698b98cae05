#include "exogym/runtime/train/training_result.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The model's metric names in its order: validation.csv's local_<name>
// columns (summary.json's objects sort their keys), else the final record's.
std::vector<std::string> metric_names(const fs::path& run_dir, const json& final_record) {
  std::vector<std::string> names;
  const auto is_metric = [](const std::string& column) {
    return column.rfind("local_", 0) == 0 && column != "local_loss" && column != "local_perplexity";
  };
  const fs::path file = run_dir / "validation.csv";
  std::istringstream in(util::path_kind(file) == util::PathKind::Regular ? util::read_regular_file(file) : "");
  std::string header;
  if (in && std::getline(in, header)) {
    for (size_t start = 0, comma = 0; comma != std::string::npos; start = comma + 1) {
      comma = header.find(',', start);
      const std::string column = header.substr(start, comma == std::string::npos ? comma : comma - start);
      if (is_metric(column)) names.push_back(column.substr(6));
    }
    return names;
  }
  if (final_record.is_object()) {
    for (const auto& [key, value] : final_record.items()) {
      if (is_metric(key)) names.push_back(key.substr(6));
    }
  }
  return names;
}

output::EvalValues eval_values(const json& record, const std::string& side, const std::vector<std::string>& names) {
  output::EvalValues values;
  values.loss = output::json_number(record.at(side + "_loss"));
  for (const auto& name : names) {
    const std::string key = side + "_" + name;
    values.metrics.push_back(record.contains(key) ? output::json_number(record.at(key)) : NAN);
  }
  return values;
}

template <typename T>
std::optional<T> optional_number(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return std::nullopt;
  return object.at(key).get<T>();
}

TrainingResult parse_summary(const fs::path& run_dir, const json& summary) {
  TrainingResult r;
  r.name = summary.at("name").get<std::string>();
  r.variant = summary.value("variant", "");
  r.run_dir = run_dir;
  r.model_plugin = summary.at("model").at("plugin").get<std::string>();
  r.parameters = summary.at("model").at("parameters").get<int64_t>();
  r.strategy_plugin = summary.at("strategy").get<std::string>();
  r.nodes = summary.at("nodes").get<int>();
  r.steps = summary.at("steps").get<int64_t>();
  r.examples_trained = summary.at("examples_trained").get<int64_t>();
  r.last_train_loss = output::json_number(summary.at("last_train_loss"));
  r.wall_seconds = output::json_number(summary.at("wall_seconds"));
  if (const json& t = summary.value("timing", json::object()); t.is_object()) {
    r.dataset_seconds = t.value("datasets_s", 0.0);
  }
  const json& final_record = summary.at("final");
  r.metric_names = metric_names(run_dir, final_record);
  if (!final_record.is_null()) {
    r.final_eval = EvalRecord{
        final_record.at("step").get<int64_t>(), eval_values(final_record, "local", r.metric_names),
        eval_values(final_record, "global", r.metric_names), output::json_number(final_record.at("bytes_sent")),
        output::json_number(final_record.at("sim_time_s"))};
  }
  r.label_skew = optional_number<double>(summary.value("data", json()), "label_skew");
  const json& comm = summary.at("communication");
  const json& sim = summary.at("simulated");
  r.simulated.bytes_sent_per_node = output::json_number(comm.at("bytes_sent_per_node"));
  r.simulated.bytes_sent_total = output::json_number(comm.at("bytes_sent_total"));
  r.simulated.runtime_bytes_sent_total = output::json_number(comm.at("runtime_bytes_sent_total"));
  r.simulated.ddp_bytes_sent_per_node = output::json_number(comm.at("ddp_bytes_sent_per_node"));
  r.simulated.time_s = output::json_number(sim.at("time_s"));
  r.simulated.compute_s = output::json_number(sim.at("compute_s"));
  r.simulated.communication_s = output::json_number(sim.at("communication_s"));
  r.simulated.waiting_s = output::json_number(sim.at("waiting_s"));
  r.simulated.hidden_s = sim.value("hidden_s", 0.0);  // absent before non-blocking collectives
  if (const json& f = summary.value("faults", json()); f.is_object()) {
    r.faults = FaultTotals{f.at("failures").get<int64_t>(),
                           f.at("rejoins").get<int64_t>(),
                           f.at("late_joins").get<int64_t>(),
                           f.at("node_steps_lost").get<int64_t>(),
                           output::json_number(f.at("recovery_bytes")),
                           output::json_number(f.at("recovery_time_s"))};
  }
  if (const json& p = summary.value("participation", json()); p.is_object()) {
    r.participation = ParticipationTotals{p.at("round_steps").get<int64_t>(),
                                          p.at("node_steps_sat_out").get<int64_t>(),
                                          p.at("returns").get<int64_t>(),
                                          output::json_number(p.at("transfer_bytes")),
                                          output::json_number(p.at("transfer_time_s")),
                                          p.value("clients_with_state", int64_t{0}),
                                          p.value("client_state_bytes", 0.0)};
  }
  if (const json& target = summary.value("target", json()); target.is_object()) {
    r.target_loss = output::json_number(target.at("loss"));
    if (target.at("reached").get<bool>()) {
      r.target_hit = TargetHit{target.at("step").get<int64_t>(), output::json_number(target.at("sim_time_s")),
                               output::json_number(target.at("bytes_sent_per_node")),
                               output::json_number(target.at("wall_seconds"))};
    }
  }
  return r;
}

}  // namespace

TrainingResult read_run_result(const fs::path& run_dir) {
  const fs::path file = run_dir / "summary.json";
  if (util::path_kind(file) == util::PathKind::Missing)
    throw sdk::DataError(file.string() + ": cannot read (the run did not finish)");
  try {
    return parse_summary(run_dir, json::parse(util::read_regular_file(file)));
  } catch (const json::exception& e) {
    throw sdk::DataError(file.string() + ": not a run's summary (" + e.what() + ")");
  }
}

}  // namespace exogym::runtime::train
