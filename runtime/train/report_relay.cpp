#include "exogym/runtime/train/report_relay.h"

#include <utility>

namespace exogym::runtime::train {

using nlohmann::json;

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

}  // namespace exogym::runtime::train
