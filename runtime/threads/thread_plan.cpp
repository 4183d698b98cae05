#include "exogym/runtime/threads/thread_plan.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace exogym::runtime::threads {

ThreadPlan plan_threads(const ThreadRequest& request, int visible_cores) {
  ThreadPlan plan;
  plan.cores = request.cores > 0 ? request.cores : visible_cores;
  plan.parallelism = request.parallelism > 0 ? request.parallelism : std::max(1, std::min(request.nodes, plan.cores));
  plan.threads = request.threads > 0 ? request.threads : std::max(1, plan.cores / plan.parallelism);
  plan.pinned = request.pin && plan.cores == visible_cores && plan.parallelism <= plan.cores;
  return plan;
}

void use_intra_op_threads(int threads) {
  // Settle the thread's lazy initialisation first, so that nothing resets
  // the count after it is set. The flag it keeps is a thread_local of an
  // inline function, so each library has its own: at::get_num_threads
  // settles LibTorch's (pip's LibTorch hides it from us, and its kernels
  // would otherwise reset the count at their first parallel op),
  // lazy_init_num_threads ours.
  at::get_num_threads();
  at::internal::lazy_init_num_threads();
  at::set_num_threads(threads);
}

}  // namespace exogym::runtime::threads
