#pragma once
// A run's output folder: config.json, train.csv, validation.csv, metrics.csv,
// comm.csv, summary.json and model.pt (DESIGN §6). Rows are flushed as they are
// written, so a crashed or interrupted run keeps everything up to its end; a
// failed write throws sdk::Error naming the file (csv_file.h).
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "exogym/runtime/output/csv_file.h"
#include "exogym/runtime/sim/comm_row.h"
#include "exogym/sdk/node.h"

namespace exogym::runtime::output {

struct EvalValues {
  double loss = 0.0;
  std::vector<double> metrics;  // in the order of the model's metric_names()
};

class RunWriter final : public sdk::MetricSink {
 public:
  // `dir` is the run folder (see run_folder.h); it is created if missing.
  RunWriter(std::filesystem::path dir, std::vector<std::string> metric_names);

  const std::filesystem::path& dir() const { return dir_; }

  void write_config(const nlohmann::json& config);
  // step: steps completed (this row is the step that brought it there).
  // bytes_sent: cumulative strategy bytes per node; sim_time_s: node 0's
  // simulated clock.
  void train_row(int64_t step, int64_t examples_trained, double loss, double lr, double bytes_sent, double sim_time_s);
  void validation_row(int64_t step, const EvalValues& local, const EvalValues& global, double bytes_sent,
                      double sim_time_s);
  void comm_rows(const std::vector<sim::CommRow>& rows);
  void record(int node, int64_t step, const std::string& name, double value) override;
  void write_summary(const nlohmann::json& summary);
  // Saves {name: tensor} so that Python's torch.load returns a plain dict.
  void save_model(const std::vector<std::pair<std::string, at::Tensor>>& tensors);

 private:
  std::filesystem::path dir_;
  std::vector<std::string> metric_names_;
  CsvFile train_, validation_, metrics_, comm_;
  std::mutex metrics_mutex_;
};

}  // namespace exogym::runtime::output
