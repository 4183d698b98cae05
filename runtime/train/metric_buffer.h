#pragma once
// Where the nodes of processes other than process 0 record their metrics:
// the rows wait here until the next checkpoint or the end of the run, when
// process 0 appends them to metrics.csv.
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/sdk/metric_sink.h"

namespace exogym::runtime::train {

class MetricBuffer final : public sdk::MetricSink {
 public:
  void record(int node, int64_t step, const std::string& name, double value) override;
  // [[node, step, name, value], ...] in the order recorded.
  nlohmann::json rows() const;
  // The rows, leaving none.
  nlohmann::json take_rows();

 private:
  mutable std::mutex mutex_;
  nlohmann::json rows_ = nlohmann::json::array();
};

// Records `rows` (as MetricBuffer::rows() gives them, after a trip through
// JSON text: a value that is not finite is its string, output/json_numbers.h,
// and null is NaN) into `sink`.
void replay_metrics(const nlohmann::json& rows, sdk::MetricSink& sink);

}  // namespace exogym::runtime::train
