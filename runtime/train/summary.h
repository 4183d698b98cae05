#pragma once
// The end of a run: every node's account brought to process 0, the run's
// result, and summary.json.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "exogym/runtime/train/training_result.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::output {
class RunWriter;
}

namespace exogym::runtime::train {

class Membership;
class Meters;
class MetricBuffer;
struct RunContext;
struct TrainingSetup;
struct TrainingState;

// What the nodes of every process counted.
struct NodeAccounts {
  nlohmann::json per_node;        // Meters::node_stats of every node
  nlohmann::json remote_metrics;  // metrics.csv rows the other processes kept
  struct {
    double cluster_sent = 0, runtime_cluster_sent = 0;  // all nodes' bytes
    double group_view_sent = 0;                         // of cluster_sent, extrapolated from subgroups
    int64_t collectives = 0;                            // strategy collectives per node
  } reporter;                                           // as the reporting node saw them
};

// A collective over the processes of a run (`mesh`; null: one process):
// every process calls it. The counters of this process's nodes come from
// `simulation`, the reporting node from `membership`; `remote_metrics`: the
// rows this process kept for process 0 (null in process 0).
NodeAccounts gather_accounts(const Meters& simulation, const Membership& membership, const MetricBuffer* remote_metrics,
                             dist::ProcessMesh* mesh);

// This process's result; its simulated account is filled by write_summary.
// It reads every part of the run but the simulation (the set-up, the run
// folder, the membership, the loop's span, the checkpoints' counts, the
// reports), so it takes the whole state.
TrainingResult run_result(const TrainingState& s);

// Process 0: appends the other processes' metrics to metrics.csv, fills
// r.simulated and writes summary.json through `writer`. The DDP estimate
// needs the network and one replica's gradient sizes (`setup`'s replica of
// the first node of this process), the faults' section the live nodes.
void write_summary(const RunContext& run, const TrainingSetup& setup, const Meters& simulation,
                   const Membership& membership, output::RunWriter& writer, TrainingResult& r,
                   const NodeAccounts& accounts);

}  // namespace exogym::runtime::train
