#pragma once
// What the processes of a run keep in the rendezvous store, by process q:
//
//   rank/q       counter: the processes that claimed RANK q (more than one:
//                RANK given twice)
//   hello/q      JSON: q's WORLD_SIZE, run fingerprint, host and pid
//   heartbeat/q  counter: q adds one a few times per timeout while it lives
//   abort/q      why q failed; the counter "aborts" says that one was written
//   bye/q        q is done with the store: "done" or "failed"
//   waits/q      where q's nodes wait, for deadlocks across processes
//                (comm/cross_process_waits.h)
//
// and, for the r-th run of the session that stops together on a signal
// (checkpoints on; checkpoint/stop_vote.h):
//
//   stop/r       counter: the processes that were asked to stop (a signal)
//   stop/r/q     q's proposed stop step, or the run's last step + 1 once q's
//                nodes finished (they stop nowhere before)
#include <string>

namespace exogym::runtime::dist {

inline std::string rank_key(int process) { return "rank/" + std::to_string(process); }
inline std::string hello_key(int process) { return "hello/" + std::to_string(process); }
inline std::string heartbeat_key(int process) { return "heartbeat/" + std::to_string(process); }
inline std::string abort_key(int process) { return "abort/" + std::to_string(process); }
inline std::string bye_key(int process) { return "bye/" + std::to_string(process); }
inline std::string waits_key(int process) { return "waits/" + std::to_string(process); }
inline std::string stop_asked_key(int run) { return "stop/" + std::to_string(run); }
inline std::string stop_key(int run, int process) {
  return "stop/" + std::to_string(run) + "/" + std::to_string(process);
}
inline constexpr const char* kAbortCount = "aborts";

}  // namespace exogym::runtime::dist
