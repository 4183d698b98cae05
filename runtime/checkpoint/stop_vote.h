#pragma once
// A run with checkpoints, spread over several processes, stopped by a
// signal: the processes agree on the step where every node stops and saves
// (checkpoint/stop_point.h explains why that step is safe). A thread of its
// own, so that a process whose nodes are all blocked in collectives still
// votes: once this process is signalled, or hears through the rendezvous
// store that another one was (a SIGTERM sent to one host's process), it
// posts its proposal, then hands the largest proposal to the nodes once
// every process has posted one.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::checkpoint {
class StopPoint;
}
namespace exogym::runtime::threads {
class AbortSignal;
}

namespace exogym::runtime::checkpoint {

class StopVote {
 public:
  // `point` is shared (several processes); `abort` stops the run if the
  // store fails mid-vote. Opens the run's round in `mesh`.
  StopVote(dist::ProcessMesh& mesh, checkpoint::StopPoint& point, threads::AbortSignal& abort, int64_t max_steps);
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  // This process's nodes trained to the end without stopping: a process
  // still voting must not wait for this one, and stops nowhere before the
  // end either.
  void finished();

 private:
  void loop();
  // Posts `step` once; with mutex_ held.
  void post(int64_t step, bool asked);

  dist::ProcessMesh& mesh_;
  checkpoint::StopPoint& point_;
  threads::AbortSignal& abort_;
  const int64_t max_steps_;
  const int round_;

  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool posted_ = false;
  std::thread thread_;
};

}  // namespace exogym::runtime::checkpoint
