#include "exogym/runtime/threads/worker_thread.h"

#include "exogym/runtime/threads/thread_plan.h"

namespace exogym::runtime::threads {

WorkerThread::WorkerThread(int intra_op_threads) : thread_([this, intra_op_threads] { main_loop(intra_op_threads); }) {}

WorkerThread::~WorkerThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void WorkerThread::run(const std::function<void()>& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  finished_ = false;
  error_ = nullptr;
  wake_.notify_one();
  done_.wait(lock, [this] { return finished_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void WorkerThread::main_loop(int intra_op_threads) {
  // OpenMP settings are per thread (node_loop.cpp).
  use_intra_op_threads(intra_op_threads);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || (job_ && !finished_); });
    if (stopping_) return;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job_)();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    finished_ = true;
    done_.notify_one();
  }
}

}  // namespace exogym::runtime::threads
