#pragma once
// `exogym-run --nproc P`: starts P processes of this same program on this
// host, with the torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a fresh run secret
// (EXOGYM_RUN_SECRET) set, and supervises them. If
// one fails, the others stop by themselves (they notice the lost peer); any
// still running after a grace period are terminated, then killed. The
// launcher reports which process failed first and how (exit status or
// signal).
#include <chrono>
#include <string>
#include <vector>

namespace exogym::runtime::dist {

struct LaunchSpec {
  int processes = 1;
  std::vector<std::string> args;  // each process's arguments (without --nproc)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port
  // How long the others may take to stop by themselves after one failed.
  std::chrono::milliseconds grace = std::chrono::seconds(65);
};

// Runs the processes to their end. Returns the launcher's exit status: 0 if
// every process succeeded; else the first failure's exit status (1 for a
// process killed by a signal; 130 after Ctrl-C or SIGTERM). Throws
// sdk::Error when the processes cannot start (e.g. the port is in use).
int launch_local(const LaunchSpec& spec);

// How a process ended, for messages: "exited with status 1", "was killed by
// signal 9 (Killed)".
std::string describe_exit(int wait_status);

}  // namespace exogym::runtime::dist
