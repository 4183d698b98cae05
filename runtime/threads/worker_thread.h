#pragma once
// One thread that runs the jobs handed to it, one at a time, while the
// thread that handed each over waits for it. Stacked execution
// (train/node_stacks.h) runs every step's forward and backward of a stack
// here rather than on whichever node thread arrives last: the job's OpenMP
// team then lives on one thread for the whole run, instead of one team per
// node thread (thousands, with thousands of nodes).
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace exogym::runtime::threads {

class WorkerThread {
 public:
  // The thread starts with `intra_op_threads` LibTorch intra-op threads.
  explicit WorkerThread(int intra_op_threads);
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Runs `job` on the worker thread and returns when it is done, rethrowing
  // what it threw. One caller at a time.
  void run(const std::function<void()>& job);

 private:
  void main_loop(int intra_op_threads);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void()>* job_ = nullptr;
  bool finished_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above are made
};

}  // namespace exogym::runtime::threads
