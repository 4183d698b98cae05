// NodeRun's step boundaries (node_run.h): where a signal stops the run,
// and the checkpoints written there.
#include <chrono>
#include <filesystem>

#include "exogym/runtime/async/async_checkpoint.h"
#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/train/checkpointing.h"
#include "exogym/runtime/train/node_run.h"
#include "exogym/runtime/train/reports.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

void NodeRun::boundary(int64_t step) {
  bool stop = false;
  checkpoint::StopPoint* stop_point = s_.checkpoints.stop_point.get();
  if (stop_point) {
    using Answer = checkpoint::StopPoint::Answer;
    Answer answer;
    while ((answer = stop_point->at_boundary(rank_, step, host::interrupt_requested())) == Answer::Wait) {
      // This process's proposal: wait for the other processes' (stop_vote.h),
      // without holding a compute slot another node needs to get here.
      phase_ = "waiting for the processes to agree where to stop after the signal";
      slot_.release();
      const bool agreed = stop_point->wait_for_agreement();
      slot_.acquire();
      if (!agreed) throw sdk::AbortedError("the run failed while its processes agreed where to stop");
    }
    stop = answer == Answer::Stop;
  }
  if (stop || checkpoint_due(m_, s_.checkpoints, step)) write_checkpoint(step);
  if (stop) {
    throw host::Interrupted("interrupted by a signal (" + host::interrupt_signal_text() + ") after " +
                            std::to_string(step) + " steps; resume with exogym-run --resume " +
                            s_.checkpoints.writer->folder().parent_path().string());
  }
}

// Collective: the nodes meet, every node writes its file, they meet, (over
// several processes: the other processes hand their metric rows over, they
// meet,) node 0 commits, they meet again (so that a failed commit stops
// every node). The meetings are the runtime's, unmetered: a checkpoint
// changes no count and no clock.
//
// The first meeting makes the checkpoint one snapshot: a node that sat the
// step out gets here while the others still compute it, and what the nodes
// share (sdk/shared.h: DiLoCo's master copy, stepped by the first node past
// the average) would otherwise change under its writer, between the file's
// digest and its bytes.
void NodeRun::write_checkpoint(int64_t step) {
  phase_ = "writing the checkpoint of step " + std::to_string(step);
  const auto started = std::chrono::steady_clock::now();
  CheckpointState& checkpoints = s_.checkpoints;
  meet_every_node();
  checkpoint::write_node_state(
      checkpoints.writer->partial_folder(step), rank_, step, model_, strategy_, meter_.state(),
      async::save_async_state(s_.simulation->async(), rank_, rank_ == s_.run.role.block.first));
  // Every process's store holds every client: node 0 writes it.
  if (rank_ == 0 && membership_.client_store())
    checkpoint::write_client_states(checkpoints.writer->partial_folder(step), step,
                                    membership_.client_store()->stored());
  meet_every_node();
  if (s_.run.role.mesh) {
    // Every node of this process is here, so no metric row or report is
    // still coming.
    meet_every_node([this, step] {
      if (s_.outputs.metric_buffer)
        hand_over_metrics(*s_.outputs.metric_buffer, *s_.checkpoints.writer, s_.run.role.mesh->rank(), step);
      if (membership_.simulated()) exchange_reports(s_.run, s_.outputs, s_.reported);
    });
  }
  std::filesystem::path folder;
  if (rank_ == 0)
    folder = commit_checkpoint(s_.run.role, *s_.outputs.writer, s_.reported, membership_, checkpoints, step);
  meet_every_node();
  if (rank_ != 0) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++checkpoints.written;
  checkpoints.seconds += seconds;
  s_.run.log->debug("checkpoint {} written in {:.3f} s", folder.string(), seconds);
}

}  // namespace exogym::runtime::train
