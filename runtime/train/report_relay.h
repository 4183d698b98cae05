#pragma once
// Over several processes whose nodes fail, the reporting node may live in a
// process that does not write the run folder: its reports wait here until
// the next meeting of every process, where exchange_reports (reports.h)
// brings them to process 0.
#include <mutex>
#include <nlohmann/json.hpp>

#include "exogym/runtime/output/safetensors.h"

namespace exogym::runtime::train {

// The reports of a reporting node in a process that does not write the run
// folder, in the order made, as JSON (doubles round-trip exactly).
class ReportRelay {
 public:
  void add(nlohmann::json report);
  nlohmann::json take();

  // The final model, for process 0 to save (model.pt, model.safetensors).
  output::NamedTensors final_model;

 private:
  std::mutex mutex_;
  nlohmann::json reports_ = nlohmann::json::array();
};

}  // namespace exogym::runtime::train
