// How node threads share a process's cores (threads/thread_plan.h): the one
// policy the simulator and the benchmark's bare loop both follow, and the
// intra-op threads each thread keeps.
#include <ATen/Parallel.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "exogym/runtime/threads/thread_plan.h"
#include "exogym/runtime/threads/worker_thread.h"
#include "testing.h"

using exogym::runtime::threads::plan_threads;
using exogym::runtime::threads::ThreadPlan;
using exogym::runtime::threads::ThreadRequest;

namespace {

ThreadRequest request(int nodes, int parallelism = 0, int threads = 0, int cores = 0, bool pin = true) {
  ThreadRequest r;
  r.nodes = nodes;
  r.parallelism = parallelism;
  r.threads = threads;
  r.cores = cores;
  r.pin = pin;
  return r;
}

}  // namespace

TEST_CASE("thread plan: by default every node computes at once up to one per core, sharing the cores", "[threads]") {
  const ThreadPlan few = plan_threads(request(4), 2);
  CHECK(few.cores == 2);
  CHECK(few.parallelism == 2);
  CHECK(few.threads == 1);

  const ThreadPlan one = plan_threads(request(1), 8);
  CHECK(one.parallelism == 1);
  CHECK(one.threads == 8);

  const ThreadPlan three = plan_threads(request(3), 8);
  CHECK(three.parallelism == 3);
  CHECK(three.threads == 2);  // 8 / 3, rounded down

  // Automatic settings never ask for more OpenMP threads than cores.
  for (int nodes : {1, 2, 3, 5, 16, 1024}) {
    for (int cores : {1, 2, 3, 8, 64}) {
      const ThreadPlan plan = plan_threads(request(nodes), cores);
      INFO(nodes << " nodes on " << cores << " cores");
      CHECK(plan.parallelism * plan.threads <= cores);
      CHECK_FALSE(plan.oversubscribed());
    }
  }
}

TEST_CASE("thread plan: explicit parallelism and threads are kept, and too many are flagged", "[threads]") {
  const ThreadPlan both = plan_threads(request(16, 4, 3), 16);
  CHECK(both.parallelism == 4);
  CHECK(both.threads == 3);
  CHECK_FALSE(both.oversubscribed());  // 12 threads on 16 cores

  // More slots than cores: at least one thread each, which oversubscribes.
  const ThreadPlan slots = plan_threads(request(16, 16), 2);
  CHECK(slots.parallelism == 16);
  CHECK(slots.threads == 1);
  CHECK(slots.oversubscribed());

  // Threads shared among explicit slots.
  CHECK(plan_threads(request(16, 2), 8).threads == 4);

  const ThreadPlan threads = plan_threads(request(2, 0, 2), 2);
  CHECK(threads.parallelism == 2);
  CHECK(threads.threads == 2);
  CHECK(threads.oversubscribed());  // 2 x 2 on 2 cores
  CHECK_FALSE(plan_threads(request(2, 2, 1), 2).oversubscribed());
}

TEST_CASE("thread plan: a process given part of the host's cores plans for those", "[threads]") {
  const ThreadPlan share = plan_threads(request(8, 0, 0, /*cores=*/4), 16);
  CHECK(share.cores == 4);
  CHECK(share.parallelism == 4);
  CHECK(share.threads == 1);
}

TEST_CASE("thread plan: slots are pinned only for a process alone on its host with a core per slot", "[threads]") {
  CHECK(plan_threads(request(4), 4).pinned);
  CHECK(plan_threads(request(4, 0, 0, /*cores=*/4), 4).pinned);  // all the cores it can see
  CHECK_FALSE(plan_threads(request(4, 0, 0, 0, /*pin=*/false), 4).pinned);
  // Processes sharing a host (each given part of its cores) are left to the kernel.
  CHECK_FALSE(plan_threads(request(4, 0, 0, /*cores=*/2), 4).pinned);
  // More slots than cores cannot each have their own.
  CHECK_FALSE(plan_threads(request(8, 8), 4).pinned);
  CHECK(plan_threads(request(8, 4), 4).pinned);
}

// What a thread asks for, it keeps: another thread setting its own count
// later (as every node thread does) does not change this one's, whichever
// starts first. With at::set_num_threads alone the stack's worker thread
// computed with 1 or 2 threads as the threads happened to start, and a bf16
// run was not the same bits twice.
TEST_CASE("a thread keeps the intra-op threads it asked for when another thread sets other ones") {
  using exogym::runtime::threads::use_intra_op_threads;
  const auto set_elsewhere = [](int n) { std::thread([n] { at::set_num_threads(n); }).join(); };
  std::mutex mutex;
  std::condition_variable changed;
  int stage = 0;
  int seen = 0;
  std::thread asker([&] {
    use_intra_op_threads(2);
    std::unique_lock<std::mutex> lock(mutex);
    stage = 1;
    changed.notify_all();
    changed.wait(lock, [&] { return stage == 2; });
    seen = at::get_num_threads();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return stage == 1; });
  }
  set_elsewhere(1);
  {
    std::lock_guard<std::mutex> lock(mutex);
    stage = 2;
  }
  changed.notify_all();
  asker.join();
  CHECK(seen == 2);

  // The stack's worker thread, asked for 3, after the node threads set 1.
  exogym::runtime::threads::WorkerThread worker(3);
  worker.run([] {});
  set_elsewhere(1);
  int worker_threads = 0;
  worker.run([&] { worker_threads = at::get_num_threads(); });
  CHECK(worker_threads == 3);
}
