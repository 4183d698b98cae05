#pragma once
// The end of a run: every node's account brought to process 0, the run's
// result, and summary.json.
#include <nlohmann/json.hpp>

#include "exogym/runtime/train/training_result.h"
#include "exogym/runtime/train/training_state.h"

namespace exogym::runtime::train {

// What the nodes of every process counted.
struct NodeAccounts {
  nlohmann::json per_node;        // Meters::node_stats of every node
  nlohmann::json remote_metrics;  // metrics.csv rows the other processes kept
  struct {
    double cluster_sent = 0, runtime_cluster_sent = 0;  // all nodes' bytes
    int64_t collectives = 0;                            // strategy collectives per node
  } reporter;                                           // as the reporting node saw them
};

// A collective over the processes of a run: every process calls it.
NodeAccounts gather_accounts(const TrainingState& s);

// This process's result; its simulated account is filled by write_summary.
TrainingResult run_result(const TrainingState& s);

// Process 0: appends the other processes' metrics to metrics.csv, fills
// r.simulated and writes summary.json.
void write_summary(TrainingState& s, TrainingResult& r, const NodeAccounts& accounts);

}  // namespace exogym::runtime::train
