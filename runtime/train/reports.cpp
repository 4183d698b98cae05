#include "exogym/runtime/train/reports.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "exogym/runtime/comm/named_tensor_broadcast.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/reported_results.h"
#include "exogym/runtime/train/run_context.h"
#include "exogym/runtime/train/training_outputs.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// The reports travel as JSON text, their numbers that are not finite as strings (exchange_reports): a
// loss that diverged, a clock that overflowed arrive as they left.
using output::json_number;

json comm_json(const std::vector<sim::CommRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    out.push_back({r.step, static_cast<int>(r.source), static_cast<int>(r.kind), r.calls, r.bytes_sent, r.time_s});
  }
  return out;
}

std::vector<sim::CommRow> comm_from(const json& rows) {
  std::vector<sim::CommRow> out;
  for (const auto& r : rows) {
    out.push_back({r.at(0).get<int64_t>(), static_cast<sim::TrafficSource>(r.at(1).get<int>()),
                   static_cast<sim::CollectiveKind>(r.at(2).get<int>()), r.at(3).get<int64_t>(), json_number(r.at(4)),
                   json_number(r.at(5))});
  }
  return out;
}

void write_train(TrainingOutputs& out, ReportedResults& reported, const TrainReport& row,
                 const std::vector<sim::CommRow>& comm) {
  reported.last_train_loss = row.loss;
  out.writer->train_row(row.step, row.examples, row.loss, row.lr, row.bytes_sent, row.sim_time_s, row.live_nodes);
  out.writer->comm_rows(comm);
  out.progress->step(row.step, row.loss, row.lr);
}

// `target_loss`: eval.target_loss.
void write_evaluation(TrainingOutputs& out, ReportedResults& reported, const std::optional<double>& target_loss,
                      const EvalRecord& r, double wall_seconds) {
  out.writer->validation_row(r.step, r.local, r.global, r.bytes_sent, r.sim_time_s);
  if (target_loss && !reported.target_hit && r.global.loss <= *target_loss) {
    reported.target_hit = TargetHit{r.step, r.sim_time_s, r.bytes_sent, wall_seconds};
  }
  // The writer's metric names are the model's (open_outputs).
  const std::vector<std::string>& names = out.writer->metric_names();
  output::Progress::Metrics metrics;
  for (size_t i = 0; i < names.size(); ++i) metrics.emplace_back(names[i], r.global.metrics[i]);
  out.progress->validation(r.step, r.local.loss, r.global.loss, metrics);
  reported.last_eval = r;
}

double wall_seconds(const RunContext& run) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - run.started).count();
}

// Process 0: one process's reports, in the order made.
void replay(const manifest::Manifest& m, TrainingOutputs& out, ReportedResults& reported, const json& reports) {
  for (const auto& r : reports) {
    const std::string kind = r.at("kind");
    if (kind == "train") {
      TrainReport row;
      row.step = r.at("step");
      row.examples = r.at("examples");
      row.loss = json_number(r.at("loss"));
      row.lr = json_number(r.at("lr"));
      row.bytes_sent = json_number(r.at("bytes_sent"));
      row.sim_time_s = json_number(r.at("sim_time_s"));
      if (!r.at("live_nodes").is_null()) row.live_nodes = r.at("live_nodes").get<int>();
      write_train(out, reported, row, comm_from(r.at("comm")));
    } else if (kind == "comm") {
      out.writer->comm_rows(comm_from(r.at("comm")));
    } else {
      EvalRecord e;
      e.step = r.at("step");
      e.local = output::EvalValues::from_json(r.at("local"));
      e.global = output::EvalValues::from_json(r.at("global"));
      e.bytes_sent = json_number(r.at("bytes_sent"));
      e.sim_time_s = json_number(r.at("sim_time_s"));
      write_evaluation(out, reported, m.target_loss, e, json_number(r.at("wall_seconds")));
    }
  }
}

// The final model from the process of the last reporting node to process 0.
void hand_over_final_model(const RunContext& run, TrainingOutputs& out, int final_node) {
  dist::ProcessMesh& mesh = *run.role.mesh;
  const int root = dist::process_of_node(final_node, run.m.nodes, mesh.size());
  if (root == 0) return;  // written already
  const output::NamedTensors mine = mesh.rank() == root ? out.relay->final_model : output::NamedTensors();
  const output::NamedTensors model = comm::broadcast_named_tensors(mesh, root, mine, "the final model");
  if (out.writer) out.writer->save_model(model, run.m.model_formats);
}

}  // namespace

TrainReport train_report(const manifest::Manifest& m, const Membership& membership, const sim::NodeMeter& meter,
                         int64_t steps, double loss, double lr) {
  TrainReport row;
  row.step = steps;
  row.loss = loss;
  row.lr = lr;
  row.bytes_sent = meter.cluster_sent(sim::TrafficSource::Strategy) / static_cast<double>(m.nodes);
  row.sim_time_s = meter.clock();
  if (membership.simulated()) {
    row.examples = membership.examples_trained(steps, m.batch_size);
    row.live_nodes = static_cast<int>(membership.live().size());
  } else {
    row.examples = steps * m.batch_size * m.nodes;
  }
  return row;
}

void report_train(TrainingOutputs& outputs, ReportedResults& reported, const TrainReport& row,
                  const std::vector<sim::CommRow>& comm) {
  if (outputs.writer) return write_train(outputs, reported, row, comm);
  outputs.relay->add({{"kind", "train"},
                      {"step", row.step},
                      {"examples", row.examples},
                      {"loss", row.loss},
                      {"lr", row.lr},
                      {"bytes_sent", row.bytes_sent},
                      {"sim_time_s", row.sim_time_s},
                      {"live_nodes", row.live_nodes ? json(*row.live_nodes) : json(nullptr)},
                      {"comm", comm_json(comm)}});
}

void report_comm(TrainingOutputs& outputs, const std::vector<sim::CommRow>& comm) {
  if (outputs.writer) return outputs.writer->comm_rows(comm);
  outputs.relay->add({{"kind", "comm"}, {"comm", comm_json(comm)}});
}

void report_evaluation(const RunContext& run, TrainingOutputs& outputs, ReportedResults& reported,
                       const EvalRecord& r) {
  if (outputs.writer) return write_evaluation(outputs, reported, run.m.target_loss, r, wall_seconds(run));
  outputs.relay->add({{"kind", "evaluation"},
                      {"step", r.step},
                      {"local", r.local.to_json()},
                      {"global", r.global.to_json()},
                      {"bytes_sent", r.bytes_sent},
                      {"sim_time_s", r.sim_time_s},
                      {"wall_seconds", wall_seconds(run)}});
}

void report_final_model(TrainingOutputs& outputs, const std::vector<std::string>& formats, output::NamedTensors model) {
  if (outputs.writer) return outputs.writer->save_model(model, formats);
  outputs.relay->final_model = std::move(model);
}

void exchange_reports(const RunContext& run, TrainingOutputs& outputs, ReportedResults& reported, int final_node) {
  const json mine = outputs.relay ? outputs.relay->take() : json::array();
  const std::vector<std::string> all = run.role.mesh->all_gather_text(output::with_finite_numbers(mine).dump());
  if (outputs.writer) {
    for (size_t q = 1; q < all.size(); ++q) replay(run.m, outputs, reported, json::parse(all[q]));
  }
  if (final_node >= 0 && !run.m.model_formats.empty()) hand_over_final_model(run, outputs, final_node);
}

}  // namespace exogym::runtime::train
