#include "exogym/runtime/threads/work_crew.h"

#include "exogym/runtime/threads/thread_plan.h"

namespace exogym::runtime::threads {

WorkCrew::WorkCrew(int helpers, int intra_op_threads)
    : helpers_(std::max(0, helpers)), intra_op_threads_(std::max(1, intra_op_threads)) {}

WorkCrew::~WorkCrew() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkCrew::work(const std::function<void(int64_t)>& item) {
  for (;;) {
    int64_t i;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= count_) return;
      i = next_++;
    }
    try {
      item(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void WorkCrew::helper_main() {
  // Each helper is one of the compute slots.
  use_intra_op_threads(intra_op_threads_);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t)>* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (!job_) continue;  // woke after the job was over
      job = job_;
      ++busy_;
    }
    work(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_.notify_one();
  }
}

void WorkCrew::run(int64_t count, const std::function<void(int64_t)>& item) {
  if (count <= 0) return;
  if (helpers_ == 0 || count == 1) {
    std::exception_ptr error;
    for (int64_t i = 0; i < count; ++i) {
      try {
        item(i);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (threads_.empty()) {
      for (int h = 0; h < helpers_; ++h) threads_.emplace_back([this] { helper_main(); });
    }
    job_ = &item;
    count_ = count;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  work(item);
  std::exception_ptr error;
  {
    // Helpers that woke late find no items left and leave at once; those
    // still working finish their item before the job's storage goes away.
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
    count_ = 0;
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace exogym::runtime::threads
