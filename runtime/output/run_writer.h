#pragma once
// A run's output folder: config.json, data.csv, train.csv, validation.csv,
// metrics.csv, comm.csv, events.csv (runs that simulate failures),
// summary.json, model.pt and model.safetensors (docs/manifest.md#run-outputs).
// Rows are flushed as they are written, so a crashed or interrupted run keeps
// everything up to its end; a failed write throws sdk::Error naming the file
// (csv_file.h).
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exogym/runtime/data/node_data.h"
#include "exogym/runtime/output/csv_file.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/sim/comm_row.h"
#include "exogym/sdk/metric_sink.h"

namespace exogym::runtime::output {

struct EvalValues {
  double loss = 0.0;
  std::vector<double> metrics;  // in the order of the model's metric_names()

  // {"loss": ..., "metrics": [...]}, a loss or metric that is not finite as its string (json_numbers.h),
  // for checkpoints and the trip from another process; from_json reads it back, null as NaN.
  nlohmann::json to_json() const;
  static EvalValues from_json(const nlohmann::json& j);
};

class RunWriter final : public sdk::MetricSink {
 public:
  // `dir` is the run folder (see run_folder.h); it is created if missing.
  // `append`: a resumed run, whose CSVs are there (cut back to its
  // checkpoint): rows are appended to them. `faults`: nodes fail in this
  // run: train.csv has a live_nodes column, and events.csv is written.
  RunWriter(std::filesystem::path dir, std::vector<std::string> metric_names, bool append = false, bool faults = false);

  const std::filesystem::path& dir() const { return dir_; }
  // validation.csv's metrics, beyond the loss: the model's metric_names().
  const std::vector<std::string>& metric_names() const { return metric_names_; }

  void write_config(const nlohmann::json& config);
  // data.csv: "node,examples", then one "label_<l>" column per label any
  // node has (ascending; none without labels), one row per node.
  void write_data(const std::vector<data::NodeData>& nodes);
  // step: steps completed (this row is the step that brought it there).
  // bytes_sent: cumulative strategy bytes per node; sim_time_s: node 0's
  // simulated clock. `live_nodes`: the nodes that took the step (runs with
  // failures only).
  void train_row(int64_t step, int64_t examples_trained, double loss, double lr, double bytes_sent, double sim_time_s,
                 std::optional<int> live_nodes = std::nullopt);
  // events.csv: a node failed, rejoined or joined at `step` (0-based: the
  // first step it missed or took part in again).
  void event_row(int64_t step, double sim_time_s, int node, const std::string& event, const std::string& detail);
  void validation_row(int64_t step, const EvalValues& local, const EvalValues& global, double bytes_sent,
                      double sim_time_s);
  void comm_rows(const std::vector<sim::CommRow>& rows);
  void record(int node, int64_t step, const std::string& name, double value) override;
  void write_summary(const nlohmann::json& summary);
  // Flushes the CSVs and returns their sizes, {"train.csv": bytes, ...}:
  // where a resumed run cuts them back to.
  nlohmann::json flush_csvs();
  // Writes model.<format> for each of `formats` ("pt": model_pt.h,
  // "safetensors": safetensors.h), the same tensors bit for bit in each.
  void save_model(const NamedTensors& tensors, const std::vector<std::string>& formats);

 private:
  std::filesystem::path dir_;
  std::vector<std::string> metric_names_;
  CsvFile train_, validation_, metrics_, comm_, events_;
  bool faults_;
  std::mutex metrics_mutex_;
};

}  // namespace exogym::runtime::output
