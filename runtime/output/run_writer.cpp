#include "exogym/runtime/output/run_writer.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "exogym/runtime/output/atomic_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

namespace fs = std::filesystem;

static std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::ostringstream s;
  s << std::setprecision(std::numeric_limits<double>::max_digits10) << value;
  return s.str();
}

static double perplexity(double loss) { return std::exp(loss); }

// metrics.csv is written in blocks of this size (and at the end), since
// strategies may record a value per node per step.
constexpr size_t kMetricsBlock = 1 << 16;

RunWriter::RunWriter(fs::path dir, std::vector<std::string> metric_names)
    : dir_(std::move(dir)), metric_names_(std::move(metric_names)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw sdk::Error(dir_.string() + ": cannot create the run folder: " + ec.message());
  train_ = CsvFile(dir_ / "train.csv", "step,examples_trained,train_loss,train_perplexity,lr,bytes_sent,sim_time_s");
  std::string header = "step,local_loss,local_perplexity,global_loss,global_perplexity";
  for (const auto& m : metric_names_) header += ",local_" + m;
  for (const auto& m : metric_names_) header += ",global_" + m;
  header += ",bytes_sent,sim_time_s";
  validation_ = CsvFile(dir_ / "validation.csv", header);
  metrics_ = CsvFile(dir_ / "metrics.csv", "step,node,name,value");
  comm_ = CsvFile(dir_ / "comm.csv", "step,source,collective,calls,bytes_sent,time_s");
}

void RunWriter::write_config(const nlohmann::json& config) {
  write_file_atomically(dir_ / "config.json", config.dump(2) + "\n");
}

void RunWriter::train_row(int64_t step, int64_t examples_trained, double loss, double lr, double bytes_sent,
                          double sim_time_s) {
  train_.append(std::to_string(step) + ',' + std::to_string(examples_trained) + ',' + number(loss) + ',' +
                number(perplexity(loss)) + ',' + number(lr) + ',' + number(bytes_sent) + ',' + number(sim_time_s) +
                '\n');
  train_.flush();
}

void RunWriter::validation_row(int64_t step, const EvalValues& local, const EvalValues& global, double bytes_sent,
                               double sim_time_s) {
  std::string row = std::to_string(step) + ',' + number(local.loss) + ',' + number(perplexity(local.loss)) + ',' +
                    number(global.loss) + ',' + number(perplexity(global.loss));
  for (double v : local.metrics) row += ',' + number(v);
  for (double v : global.metrics) row += ',' + number(v);
  validation_.append(row + ',' + number(bytes_sent) + ',' + number(sim_time_s) + '\n');
  validation_.flush();
}

void RunWriter::comm_rows(const std::vector<sim::CommRow>& rows) {
  if (rows.empty()) return;
  for (const auto& row : rows) {
    comm_.append(std::to_string(row.step) + ',' + to_string(row.source) + ',' + to_string(row.kind) + ',' +
                 std::to_string(row.calls) + ',' + number(row.bytes_sent) + ',' + number(row.time_s) + '\n');
  }
  comm_.flush();
}

void RunWriter::record(int node, int64_t step, const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  metrics_.append(std::to_string(step) + ',' + std::to_string(node) + ',' + name + ',' + number(value) + '\n');
  if (metrics_.pending() >= kMetricsBlock) metrics_.flush();
}

void RunWriter::write_summary(const nlohmann::json& summary) {
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    for (CsvFile* csv : {&train_, &validation_, &metrics_, &comm_}) csv->sync();
  }
  write_file_atomically(dir_ / "summary.json", summary.dump(2) + "\n");
}

void RunWriter::save_model(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.detach().to(at::kCPU).contiguous());
  std::vector<char> bytes = torch::jit::pickle_save(dict);
  write_file_atomically(dir_ / "model.pt", std::string(bytes.begin(), bytes.end()));
}

}  // namespace exogym::runtime::output
