#include "exogym/runtime/train/metric_buffer.h"

#include <limits>

#include "exogym/runtime/output/json_numbers.h"

namespace exogym::runtime::train {

void MetricBuffer::record(int node, int64_t step, const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.push_back({node, step, name, output::with_finite_numbers(value)});
}

nlohmann::json MetricBuffer::rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rows_;
}

nlohmann::json MetricBuffer::take_rows() {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json rows = nlohmann::json::array();
  rows.swap(rows_);
  return rows;
}

void replay_metrics(const nlohmann::json& rows, sdk::MetricSink& sink) {
  for (const auto& row : rows) {
    sink.record(row.at(0).get<int>(), row.at(1).get<int64_t>(), row.at(2).get<std::string>(),
                row.at(3).is_null() ? std::numeric_limits<double>::quiet_NaN() : output::json_number(row.at(3)));
  }
}

}  // namespace exogym::runtime::train
