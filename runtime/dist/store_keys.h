#pragma once
// What the processes of a run keep in the rendezvous store, by process q:
//
//   rank/q       counter: the processes that claimed RANK q (more than one:
//                RANK given twice)
//   hello/q      JSON: q's WORLD_SIZE, run fingerprint, host and pid
//   heartbeat/q  counter: q adds one a few times per timeout while it lives
//   abort/q      why q failed; the counter "aborts" says that one was written
//   bye/q        q is done with the store: "done" or "failed"
#include <string>

namespace exogym::runtime::dist {

inline std::string rank_key(int process) { return "rank/" + std::to_string(process); }
inline std::string hello_key(int process) { return "hello/" + std::to_string(process); }
inline std::string heartbeat_key(int process) { return "heartbeat/" + std::to_string(process); }
inline std::string abort_key(int process) { return "abort/" + std::to_string(process); }
inline std::string bye_key(int process) { return "bye/" + std::to_string(process); }
inline constexpr const char* kAbortCount = "aborts";

}  // namespace exogym::runtime::dist
