#include "exogym/runtime/output/run_writer.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/output/model_pt.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/sdk/check.h"
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

nlohmann::json EvalValues::to_json() const {
  return with_finite_numbers(nlohmann::json{{"loss", loss}, {"metrics", metrics}});
}

EvalValues EvalValues::from_json(const nlohmann::json& j) {
  const auto number = [](const nlohmann::json& x) {
    return x.is_null() ? std::numeric_limits<double>::quiet_NaN() : json_number(x);
  };
  EvalValues v;
  v.loss = number(j.at("loss"));
  for (const auto& x : j.at("metrics")) v.metrics.push_back(number(x));
  return v;
}

static double perplexity(double loss) { return std::exp(loss); }

// metrics.csv is written in blocks of this size (and at the end), since
// strategies may record a value per node per step.
constexpr size_t kMetricsBlock = 1 << 16;

RunWriter::RunWriter(fs::path dir, std::vector<std::string> metric_names, bool append, bool faults)
    : dir_(std::move(dir)), metric_names_(std::move(metric_names)), faults_(faults) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw sdk::Error(dir_.string() + ": cannot create the run folder: " + ec.message());
  const auto open = append ? CsvFile::Mode::Append : CsvFile::Mode::Create;
  train_ = CsvFile(dir_ / "train.csv",
                   std::string("step,examples_trained,train_loss,train_perplexity,lr,bytes_sent,sim_time_s") +
                       (faults ? ",live_nodes" : ""),
                   open);
  std::string header = "step,local_loss,local_perplexity,global_loss,global_perplexity";
  for (const auto& m : metric_names_) header += ",local_" + m;
  for (const auto& m : metric_names_) header += ",global_" + m;
  header += ",bytes_sent,sim_time_s";
  validation_ = CsvFile(dir_ / "validation.csv", header, open);
  metrics_ = CsvFile(dir_ / "metrics.csv", "step,node,name,value", open);
  comm_ = CsvFile(dir_ / "comm.csv", "step,source,collective,calls,bytes_sent,time_s", open);
  if (faults) events_ = CsvFile(dir_ / "events.csv", "step,sim_time_s,node,event,detail", open);
}

void RunWriter::write_config(const nlohmann::json& config) {
  util::write_file_atomically(dir_ / "config.json", config.dump(2) + "\n");
}

void RunWriter::write_data(const std::vector<data::NodeData>& nodes) {
  std::set<int64_t> labels;
  for (const auto& node : nodes)
    for (const auto& entry : node.label_counts) labels.insert(entry.first);
  std::ostringstream out;
  out << "node,examples";
  for (int64_t label : labels) out << ",label_" << label;
  out << '\n';
  for (size_t r = 0; r < nodes.size(); ++r) {
    out << r << ',' << nodes[r].examples;
    for (int64_t label : labels) {
      const auto found = nodes[r].label_counts.find(label);
      out << ',' << (found == nodes[r].label_counts.end() ? 0 : found->second);
    }
    out << '\n';
  }
  util::write_file_atomically(dir_ / "data.csv", out.str());
}

void RunWriter::train_row(int64_t step, int64_t examples_trained, double loss, double lr, double bytes_sent,
                          double sim_time_s, std::optional<int> live_nodes) {
  train_.append(std::to_string(step) + ',' + std::to_string(examples_trained) + ',' + number(loss) + ',' +
                number(perplexity(loss)) + ',' + number(lr) + ',' + number(bytes_sent) + ',' + number(sim_time_s) +
                (faults_ ? ',' + std::to_string(live_nodes.value_or(0)) : std::string()) + '\n');
  train_.flush();
}

void RunWriter::event_row(int64_t step, double sim_time_s, int node, const std::string& event,
                          const std::string& detail) {
  // Free text: quoted when it holds a comma or a quote, as CSV wants.
  std::string field = detail;
  if (detail.find_first_of(",\"\n") != std::string::npos) {
    field = "\"";
    for (char c : detail) field += c == '"' ? std::string("\"\"") : std::string(1, c);
    field += '"';
  }
  events_.append(std::to_string(step) + ',' + number(sim_time_s) + ',' + std::to_string(node) + ',' + event + ',' +
                 field + '\n');
  events_.flush();
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
    if (faults_) events_.sync();
  }
  util::write_file_atomically(dir_ / "summary.json", with_finite_numbers(summary).dump(2) + "\n");
}

nlohmann::json RunWriter::flush_csvs() {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  nlohmann::json sizes;
  const std::pair<const char*, CsvFile*> csvs[] = {
      {"train.csv", &train_}, {"validation.csv", &validation_}, {"metrics.csv", &metrics_}, {"comm.csv", &comm_}};
  for (const auto& [name, csv] : csvs) {
    csv->flush();
    sizes[name] = static_cast<int64_t>(csv->bytes());
  }
  if (faults_) {
    events_.flush();
    sizes["events.csv"] = static_cast<int64_t>(events_.bytes());
  }
  return sizes;
}

void RunWriter::save_model(const NamedTensors& tensors, const std::vector<std::string>& formats) {
  for (const auto& format : formats) {
    if (format == "pt") {
      write_model_pt(dir_ / "model.pt", tensors);
    } else if (format == "safetensors") {
      // "format": "pt" tells Hugging Face's loaders the tensors are PyTorch's.
      write_safetensors(dir_ / "model.safetensors", tensors, {{"format", "pt"}});
    } else {
      EXOGYM_CHECK_INTERNAL(false, "unknown model format \"" + format + "\" (the manifest's schema allows it)");
    }
  }
}

}  // namespace exogym::runtime::output
