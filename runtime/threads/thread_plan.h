#pragma once
// How a process's node threads share its cores: how many nodes compute at
// once (the compute slots), how many intra-op threads each uses, and whether
// each slot is pinned to its own CPUs. One policy for the simulator and the
// benchmark's bare loop, so that both do the same work the same way.
//
// Every thread that runs a parallel op gets its own OpenMP team, and teams
// spinning on more threads than cores are many times slower (on 2 cores,
// 4 MLP nodes with 2 intra-op threads each took 10.1 s for 300 steps, with 1
// thread each 0.71 s: docs/simulation.md#compute-slots), so the automatic
// choice keeps parallelism × threads within the cores.

namespace exogym::runtime::threads {

struct ThreadRequest {
  int nodes = 1;        // the nodes this process runs
  int cores = 0;        // the cores this process may use; 0: all it can see
  int parallelism = 0;  // nodes computing at once; 0: automatic
  int threads = 0;      // intra-op threads per node; 0: automatic
  bool pin = true;      // pin compute slots to CPUs where it is safe
};

struct ThreadPlan {
  int cores = 1;
  int parallelism = 1;
  int threads = 1;
  bool pinned = false;

  // More OpenMP threads than cores: only explicit settings get here, and the
  // run should warn that it will be slow.
  bool oversubscribed() const { return parallelism * threads > cores; }
};

// `visible_cores`: the cores this process can see (available_cores()).
// Automatic parallelism runs every node at once up to one per core; automatic
// threads share the cores among the slots. Slots are pinned only when asked
// and when this process has the host to itself (its cores are all it can
// see: processes sharing a host are left to the kernel) with at least one
// core per slot.
ThreadPlan plan_threads(const ThreadRequest& request, int visible_cores);

// Gives the calling thread `threads` LibTorch intra-op threads, for good.
// at::set_num_threads alone does not: a thread's first parallel op (or
// at::get_num_threads) sets its OpenMP count again to the process-wide value
// that whichever thread last called at::set_num_threads left, so a thread
// that sets its count before another thread sets a different one would
// compute with the other's, or not, as the threads happen to start; and a
// reduction's result depends on how many threads share it. The first-op
// flag is kept per library: this settles LibTorch's and ExoGym's; a plugin
// built with hidden symbols (as exogym_add_plugin builds them) has its own,
// and its first direct at::parallel_for on a thread would still reset the
// count (no built-in plugin calls one).
void use_intra_op_threads(int threads);

}  // namespace exogym::runtime::threads
