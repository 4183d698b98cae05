#pragma once
// What one run reports to its caller: the runner's comparison table reads it,
// and summary.json holds the same figures.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/output/run_writer.h"

namespace exogym::runtime::train {

struct EvalRecord {
  int64_t step = 0;
  output::EvalValues local, global;
  double bytes_sent = 0;  // per node (mean over nodes), cumulative, strategy traffic
  double sim_time_s = 0;  // node 0's simulated clock
};

// When a run first reached eval.target_loss (global validation loss).
struct TargetHit {
  int64_t step = 0;
  double sim_time_s = 0;
  double bytes_sent = 0;  // per node
  double wall_seconds = 0;
};

// The simulated cluster's account of a run (sim/node_meter.h).
struct SimulationSummary {
  double bytes_sent_per_node = 0;                            // strategy traffic, mean over nodes
  double bytes_sent_total = 0;                               // strategy traffic, all nodes
  double runtime_bytes_sent_total = 0;                       // the simulator's own collectives
  double time_s = 0;                                         // the slowest node's clock at the end
  double compute_s = 0, communication_s = 0, waiting_s = 0;  // means over nodes
  double hidden_s = 0;  // transfer time overlapped with compute (non-blocking collectives), mean over nodes
  double ddp_bytes_sent_per_node = 0;  // DDP (gradient all-reduce every step), same model, nodes and steps
};

// What failures cost a run that simulates them (summary.json "faults").
struct FaultTotals {
  int64_t failures = 0, rejoins = 0, late_joins = 0;
  int64_t node_steps_lost = 0;  // steps the nodes did not take, summed over nodes
  double recovery_bytes = 0;    // the state sent to the nodes that came back
  double recovery_time_s = 0;   // the simulated time of those transfers
};

// What partial participation did (summary.json "participation").
struct ParticipationTotals {
  int64_t round_steps = 0;
  int64_t node_steps_sat_out = 0;  // steps alive nodes were not drawn for, summed over nodes
  int64_t returns = 0;             // nodes drawn again after sitting out, each given the state
  double transfer_bytes = 0;       // that state
  double transfer_time_s = 0;      // the simulated time of those transfers
  // The state clients keep between rounds (Strategy::has_client_state) at the end:
  // the clients that hold some, and its bytes.
  int64_t clients_with_state = 0;
  double client_state_bytes = 0;
};

struct TrainingResult {
  std::string name, variant;
  std::filesystem::path run_dir;
  std::string model_plugin, strategy_plugin;
  std::vector<std::string> metric_names;
  int nodes = 0;
  int64_t steps = 0;
  int64_t examples_trained = 0;
  int64_t parameters = 0;
  double last_train_loss = 0;
  double wall_seconds = 0;
  // Where this process's wall time went: loading the datasets, from the
  // start of train_run to the first step of any of its nodes (datasets
  // included), and the training loop from that first step to the end of its
  // nodes' last step (evaluations included).
  double dataset_seconds = 0, startup_seconds = 0, loop_seconds = 0;
  // From TrainingOptions::timing_mark_step to the loop's end; 0 without a mark.
  double after_mark_seconds = 0;
  // Checkpoints this run wrote, the wall time node 0 spent in them (its
  // file, the meetings, the commit), and the size of the last one.
  int64_t checkpoints = 0;
  double checkpoint_seconds = 0, checkpoint_bytes = 0;
  std::optional<EvalRecord> final_eval;
  // Mean over nodes of the largest label fraction of a node's training
  // examples (data/node_data.h); none when the data has no labels.
  std::optional<double> label_skew;
  SimulationSummary simulated;
  std::optional<double> target_loss;
  std::optional<TargetHit> target_hit;
  std::optional<FaultTotals> faults;                 // runs that simulate failures
  std::optional<ParticipationTotals> participation;  // runs with "participation"
  // Why the run stopped before max_steps (train.on_nonfinite), if it did.
  std::optional<std::string> stopped;
};

// A finished run's result read back from its folder (summary.json, and
// validation.csv's header for the order of the model's metrics), so that a
// resumed comparison can tabulate the variants that had finished before it
// stopped exactly as they were. sdk::DataError naming the file when
// summary.json is missing or not a run's summary. The wall-clock breakdown
// (startup, loop, checkpoints) is not kept in the summary and reads as 0.
TrainingResult read_run_result(const std::filesystem::path& run_dir);

}  // namespace exogym::runtime::train
