#include "exogym/runtime/train/node_loop.h"

#include <memory>

#include "exogym/runtime/checkpoint/stop_vote.h"
#include "exogym/runtime/threads/thread_plan.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/node_run.h"
#include "exogym/runtime/train/node_stacks.h"
#include "exogym/runtime/train/reports.h"

namespace exogym::runtime::train {

void run_nodes(TrainingState& s, const threads::ThreadPlan& plan, bool exact_reduce) {
  const manifest::Manifest& m = s.run.m;
  dist::ProcessMesh* mesh = s.run.role.mesh;
  auto cluster = mesh ? std::make_unique<train::Cluster>(m.nodes, plan.parallelism, *mesh, s.run.role.block,
                                                         &s.simulation->clocks(), exact_reduce)
                      : std::make_unique<train::Cluster>(m.nodes, plan.parallelism, &s.simulation->clocks());
  if (plan.pinned) cluster->slots().pin_threads();
  std::unique_ptr<checkpoint::StopVote> vote;
  if (mesh && s.checkpoints.stop_point) {
    checkpoint::StopPoint* point = s.checkpoints.stop_point.get();
    cluster->abort_signal().on_abort([point] { point->abandon(); });
    vote = std::make_unique<checkpoint::StopVote>(*mesh, *point, cluster->abort_signal(), m.max_steps);
  }
  // The stacks meet among the cluster's nodes until every node has ended.
  struct Stacks {
    NodeStacks& stacks;
    ~Stacks() { stacks.disconnect(); }
  } stacks{*s.setup.stacks};
  // The compute slots, each with a node's intra-op threads, not one thread
  // with the process's cores: the stacked nanoGPT's backward with two
  // intra-op threads drifted 3e-4 from the per-node run over 200 steps
  // (docs/performance.md#stacked-execution).
  stacks.stacks.connect(*cluster, m.precision, plan.threads, plan.parallelism);
  cluster->run([&](int rank, threads::NodeSlot& slot) {
    // OpenMP settings are per thread: a new thread would start with one
    // OpenMP thread per core, and K such teams oversubscribe the machine.
    threads::use_intra_op_threads(plan.threads);
    NodeRun(s, *cluster, rank, slot).run();
  });
  if (vote) vote->finished();
  // What a reporting node in another process left since the last meeting,
  // and the final model it saved.
  if (mesh && m.varies_membership()) exchange_reports(s.run, s.outputs, s.reported, s.membership->reporter());
}

}  // namespace exogym::runtime::train
