#pragma once
// The benchmark's baseline: K model replicas trained data-parallel by a bare
// LibTorch loop, with no ExoGym runtime in between (no node threads, no
// collectives, no metering, no outputs). It does the same work as an
// "allreduce" run of the simulator (gradients averaged in rank order each
// step), or of a "diloco" one (local steps; every H steps the parameters
// averaged in rank order, one outer step on one master copy, copied back to
// every replica): the same model plugin, the same batches, the same
// optimizers, with the same number of worker threads and intra-op threads.
#include <memory>
#include <nlohmann/json.hpp>

#include "exogym/sdk/dataset.h"

namespace exogym::runtime::plugin {
class LoadedPlugin;
}

namespace exogym::bench {

struct BareLoopConfig {
  std::shared_ptr<runtime::plugin::LoadedPlugin> model_plugin;
  nlohmann::json model_options;  // validated
  std::shared_ptr<const sdk::Dataset> data;
  nlohmann::json optimizer;  // e.g. {"name": "adamw", "lr": 1e-3}
  // 0: allreduce; H > 0: DiLoCo with H inner steps per outer step, the outer
  // optimizer being `outer_optimizer` (DiLoCo's default when null).
  int64_t diloco_H = 0;
  nlohmann::json outer_optimizer;
  int nodes = 1;
  int64_t steps = 10, batch_size = 64;
  uint64_t seed = 42;
  int workers = 1;  // the simulator's parallelism
  int threads = 1;  // intra-op threads per worker
  // As TrainingOptions::timing_mark_step: after_mark_seconds runs from the
  // moment worker 0 finished this step (0-based; -1: none) to the loop's end.
  int64_t mark_step = -1;
};

struct BareLoopResult {
  double loop_seconds = 0;
  double after_mark_seconds = 0;  // 0 without a mark
  double last_loss = 0;           // replica 0's at the last step, as the simulator's train.csv
};

BareLoopResult run_bare_loop(const BareLoopConfig& config);

}  // namespace exogym::bench
