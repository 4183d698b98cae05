#include "exogym/runtime/train/reports.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "exogym/runtime/comm/named_tensor_broadcast.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/train/training_state.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// JSON writes NaN and infinities as null: a loss that diverged stays NaN.
double number(const json& j) { return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>(); }

json values_json(const output::EvalValues& v) { return {{"loss", v.loss}, {"metrics", v.metrics}}; }

output::EvalValues values_from(const json& j) {
  output::EvalValues v;
  v.loss = number(j.at("loss"));
  for (const auto& m : j.at("metrics")) v.metrics.push_back(number(m));
  return v;
}

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
                   static_cast<sim::CollectiveKind>(r.at(2).get<int>()), r.at(3).get<int64_t>(), r.at(4).get<double>(),
                   r.at(5).get<double>()});
  }
  return out;
}

void write_train(TrainingState& s, const TrainReport& row, const std::vector<sim::CommRow>& comm) {
  s.last_train_loss = row.loss;
  s.writer->train_row(row.step, row.examples, row.loss, row.lr, row.bytes_sent, row.sim_time_s, row.live_nodes);
  s.writer->comm_rows(comm);
  s.progress->step(row.step, row.loss, row.lr);
}

void write_evaluation(TrainingState& s, const EvalRecord& r, double wall_seconds) {
  s.writer->validation_row(r.step, r.local, r.global, r.bytes_sent, r.sim_time_s);
  if (s.m.target_loss && !s.target_hit && r.global.loss <= *s.m.target_loss) {
    s.target_hit = TargetHit{r.step, r.sim_time_s, r.bytes_sent, wall_seconds};
  }
  output::Progress::Metrics metrics;
  for (size_t i = 0; i < s.metric_names.size(); ++i) metrics.emplace_back(s.metric_names[i], r.global.metrics[i]);
  s.progress->validation(r.step, r.local.loss, r.global.loss, metrics);
  s.last_eval = r;
}

double wall_seconds(const TrainingState& s) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
}

// Process 0: one process's reports, in the order made.
void replay(TrainingState& s, const json& reports) {
  for (const auto& r : reports) {
    const std::string kind = r.at("kind");
    if (kind == "train") {
      TrainReport row;
      row.step = r.at("step");
      row.examples = r.at("examples");
      row.loss = number(r.at("loss"));
      row.lr = number(r.at("lr"));
      row.bytes_sent = r.at("bytes_sent");
      row.sim_time_s = r.at("sim_time_s");
      if (!r.at("live_nodes").is_null()) row.live_nodes = r.at("live_nodes").get<int>();
      write_train(s, row, comm_from(r.at("comm")));
    } else if (kind == "comm") {
      s.writer->comm_rows(comm_from(r.at("comm")));
    } else {
      EvalRecord e;
      e.step = r.at("step");
      e.local = values_from(r.at("local"));
      e.global = values_from(r.at("global"));
      e.bytes_sent = r.at("bytes_sent");
      e.sim_time_s = r.at("sim_time_s");
      write_evaluation(s, e, r.at("wall_seconds"));
    }
  }
}

// The final model from the process of the last reporting node to process 0.
void hand_over_final_model(TrainingState& s, int final_node) {
  dist::ProcessMesh& mesh = *s.role.mesh;
  const int root = dist::process_of_node(final_node, s.m.nodes, mesh.size());
  if (root == 0) return;  // written already
  const output::NamedTensors mine = mesh.rank() == root ? s.relay->final_model : output::NamedTensors();
  const output::NamedTensors model = comm::broadcast_named_tensors(mesh, root, mine, "the final model");
  if (s.writer) s.writer->save_model(model, s.m.model_formats);
}

}  // namespace

void ReportRelay::add(json report) {
  std::lock_guard<std::mutex> lock(mutex_);
  reports_.push_back(std::move(report));
}

json ReportRelay::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  json reports = json::array();
  reports.swap(reports_);
  return reports;
}

TrainReport train_report(const TrainingState& s, const sim::NodeMeter& meter, int64_t steps, double loss, double lr) {
  TrainReport row;
  row.step = steps;
  row.loss = loss;
  row.lr = lr;
  row.bytes_sent = meter.cluster_sent(sim::TrafficSource::Strategy) / static_cast<double>(s.m.nodes);
  row.sim_time_s = meter.clock();
  if (s.membership->simulated()) {
    row.examples = s.membership->examples_trained(steps, s.m.batch_size);
    row.live_nodes = static_cast<int>(s.membership->live().size());
  } else {
    row.examples = steps * s.m.batch_size * s.m.nodes;
  }
  return row;
}

void report_train(TrainingState& s, const TrainReport& row, const std::vector<sim::CommRow>& comm) {
  if (s.writer) return write_train(s, row, comm);
  s.relay->add({{"kind", "train"},
                {"step", row.step},
                {"examples", row.examples},
                {"loss", row.loss},
                {"lr", row.lr},
                {"bytes_sent", row.bytes_sent},
                {"sim_time_s", row.sim_time_s},
                {"live_nodes", row.live_nodes ? json(*row.live_nodes) : json(nullptr)},
                {"comm", comm_json(comm)}});
}

void report_comm(TrainingState& s, const std::vector<sim::CommRow>& comm) {
  if (s.writer) return s.writer->comm_rows(comm);
  s.relay->add({{"kind", "comm"}, {"comm", comm_json(comm)}});
}

void report_evaluation(TrainingState& s, const EvalRecord& r) {
  if (s.writer) return write_evaluation(s, r, wall_seconds(s));
  s.relay->add({{"kind", "evaluation"},
                {"step", r.step},
                {"local", values_json(r.local)},
                {"global", values_json(r.global)},
                {"bytes_sent", r.bytes_sent},
                {"sim_time_s", r.sim_time_s},
                {"wall_seconds", wall_seconds(s)}});
}

void report_final_model(TrainingState& s, output::NamedTensors model) {
  if (s.writer) return s.writer->save_model(model, s.m.model_formats);
  s.relay->final_model = std::move(model);
}

void exchange_reports(TrainingState& s, int final_node) {
  const json mine = s.relay ? s.relay->take() : json::array();
  const std::vector<std::string> all = s.role.mesh->all_gather_text(mine.dump());
  if (s.writer) {
    for (size_t q = 1; q < all.size(); ++q) replay(s, json::parse(all[q]));
  }
  if (final_node >= 0 && !s.m.model_formats.empty()) hand_over_final_model(s, final_node);
}

}  // namespace exogym::runtime::train
