#pragma once
// What the reporting node (Membership::reporter: node 0, or with failures
// the lowest live node) reports: train.csv and comm.csv rows, evaluations
// (validation.csv, the target loss), the progress line, the final model.
//
// Process 0 writes the run folder. In a run over several processes whose
// nodes fail, the reporting node may live in another process: its reports
// wait in that process's ReportRelay until the next moment every process
// meets (a membership change, a checkpoint, the end of the run), where
// exchange_reports() brings them to process 0, which writes them in order.
// The reporting node changes only at such meetings, so no row overtakes
// another.
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/sim/comm_row.h"
#include "exogym/runtime/train/training_result.h"

namespace exogym::runtime::sim {
class NodeMeter;
}

namespace exogym::runtime::train {

struct TrainingState;

// One train.csv row (RunWriter::train_row).
struct TrainReport {
  int64_t step = 0;  // steps done
  int64_t examples = 0;
  double loss = 0, lr = 0, bytes_sent = 0, sim_time_s = 0;
  std::optional<int> live_nodes;  // runs that simulate failures
};

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

// The reporting node's train.csv row after `steps` steps: its loss and lr,
// the rest from its meter (the cluster's bytes and its clock) and the run.
TrainReport train_report(const TrainingState& s, const sim::NodeMeter& meter, int64_t steps, double loss, double lr);
// The reporting node's step: its train.csv row, its comm.csv rows, the
// progress line.
void report_train(TrainingState& s, const TrainReport& row, const std::vector<sim::CommRow>& comm);
// comm.csv rows only (the collectives after the last step).
void report_comm(TrainingState& s, const std::vector<sim::CommRow>& comm);
// An evaluation: validation.csv, the target loss, the progress line.
void report_evaluation(TrainingState& s, const EvalRecord& r);
// The final model (model_formats not empty).
void report_final_model(TrainingState& s, output::NamedTensors model);

// Over several processes, where every process meets: process 0 writes what
// the other processes' reporting node left since the last meeting. Every
// process calls it at the same point. `final_node`: at the end of the run,
// the last reporting node, whose process also hands the final model over;
// -1 before.
void exchange_reports(TrainingState& s, int final_node = -1);

}  // namespace exogym::runtime::train
