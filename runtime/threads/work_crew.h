#pragma once
// A few helper threads that join one thread in a loop over independent work
// items. The in-process collectives use it: while every node waits in a
// collective, the last node to arrive does the collective's work, and the
// crew lets it use the other compute slots too (the nodes that hold them are
// all waiting, so no more threads run than `parallelism` allows). A stack's
// forward, backward and local steps borrow the slots of its waiting nodes
// in the same way (train/stack_group.h).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace exogym::runtime::threads {

class WorkCrew {
 public:
  // `helpers` threads, started on first use, each with `intra_op_threads`
  // LibTorch intra-op threads (a compute slot's). 0: the caller works alone.
  explicit WorkCrew(int helpers, int intra_op_threads = 1);
  ~WorkCrew();
  WorkCrew(const WorkCrew&) = delete;
  WorkCrew& operator=(const WorkCrew&) = delete;

  int helpers() const { return helpers_; }
  // Runs item(i) for every i in [0, count), the caller included, and returns
  // when all are done. Rethrows the first exception (the rest still finish).
  // One job at a time.
  void run(int64_t count, const std::function<void(int64_t)>& item);

 private:
  void helper_main();
  void work(const std::function<void(int64_t)>& item);

  const int helpers_, intra_op_threads_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t count_ = 0, next_ = 0;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace exogym::runtime::threads
