#pragma once
// Everything one run holds, by concern: the run's context, set-up's results,
// the outputs, the simulated cluster, the checkpoints and what the reporting
// node reported. training.cpp owns it and each node's thread (node_loop.cpp)
// works on it; every other function takes only the parts it uses.
#include <atomic>
#include <memory>

#include "exogym/runtime/train/checkpoint_state.h"
#include "exogym/runtime/train/loop_span.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/meters.h"
#include "exogym/runtime/train/reported_results.h"
#include "exogym/runtime/train/run_context.h"
#include "exogym/runtime/train/training_outputs.h"
#include "exogym/runtime/train/training_setup.h"

namespace exogym::runtime::train {

// The members are destroyed in the reverse of their order, and the order
// of the parts keeps what each part's comment asks: within `setup`, the
// replicas before the plugins that made them and `shared` before the
// plugins unload; within `outputs`, the writers before folder_lock is
// released.
struct TrainingState {
  TrainingState(const manifest::Manifest& manifest, const ProcessRole& process) : run(manifest, process) {}

  RunContext run;
  TrainingSetup setup;
  TrainingOutputs outputs;

  // This process's nodes that finished start() (the initial broadcast and
  // the strategy's init()): a run that fails before all did trained
  // nothing, and leaves no folder (outputs.h).
  std::atomic<int> nodes_started{0};

  std::unique_ptr<Meters> simulation;
  // Who is alive step by step (every node, unless the run simulates failures).
  std::unique_ptr<Membership> membership;
  LoopSpan loop;

  CheckpointState checkpoints;
  // Written by the reporting node in process 0 (reports.h).
  ReportedResults reported;
};

}  // namespace exogym::runtime::train
