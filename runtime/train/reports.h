#pragma once
// What the reporting node (Membership::reporter: node 0, or with failures
// the lowest live node) reports: train.csv and comm.csv rows, evaluations
// (validation.csv, the target loss), the progress line, the final model.
//
// Process 0 writes the run folder. In a run over several processes whose
// nodes fail, the reporting node may live in another process: its reports
// wait in that process's ReportRelay (report_relay.h) until the next moment
// every process meets (a membership change, a checkpoint, the end of the
// run), where exchange_reports() brings them to process 0, which writes them
// in order. The reporting node changes only at such meetings, so no row
// overtakes another.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/sim/comm_row.h"
#include "exogym/runtime/train/training_result.h"

namespace exogym::runtime::manifest {
struct Manifest;
}
namespace exogym::runtime::sim {
class NodeMeter;
}

namespace exogym::runtime::train {

class Membership;
struct ReportedResults;
struct RunContext;
struct TrainingOutputs;

// One train.csv row (RunWriter::train_row).
struct TrainReport {
  int64_t step = 0;  // steps done
  int64_t examples = 0;
  double loss = 0, lr = 0, bytes_sent = 0, sim_time_s = 0;
  std::optional<int> live_nodes;  // runs that simulate failures
};

// The reporting node's train.csv row after `steps` steps: its loss and lr,
// the rest from its meter (the cluster's bytes and its clock), the
// membership and the run.
TrainReport train_report(const manifest::Manifest& m, const Membership& membership, const sim::NodeMeter& meter,
                         int64_t steps, double loss, double lr);

// Each of these writes through outputs.writer in the process that writes
// the run folder, and into outputs.relay in another; what process 0 writes
// it also keeps in `reported`.

// The reporting node's step: its train.csv row, its comm.csv rows, the
// progress line.
void report_train(TrainingOutputs& outputs, ReportedResults& reported, const TrainReport& row,
                  const std::vector<sim::CommRow>& comm);
// comm.csv rows only (the collectives after the last step).
void report_comm(TrainingOutputs& outputs, const std::vector<sim::CommRow>& comm);
// An evaluation: validation.csv, the target loss (run.m's, reached after
// the wall time since run.started), the progress line.
void report_evaluation(const RunContext& run, TrainingOutputs& outputs, ReportedResults& reported, const EvalRecord& r);
// The final model, in the manifest's model_formats (not empty).
void report_final_model(TrainingOutputs& outputs, const std::vector<std::string>& formats, output::NamedTensors model);

// Over several processes, where every process meets: process 0 writes what
// the other processes' reporting node left since the last meeting. Every
// process calls it at the same point. `final_node`: at the end of the run,
// the last reporting node, whose process also hands the final model over;
// -1 before.
void exchange_reports(const RunContext& run, TrainingOutputs& outputs, ReportedResults& reported, int final_node = -1);

}  // namespace exogym::runtime::train
