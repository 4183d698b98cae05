#pragma once
// Progress of a run: a live line on a terminal (step, loss, lr, rate, ETA),
// plain log lines otherwise.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace exogym::runtime::output {

class Progress {
 public:
  enum class Mode { Live, Lines, Quiet };
  Progress(std::string label, int64_t max_steps, Mode mode);
  ~Progress();

  // Called by node 0 after each step (steps completed so far).
  void step(int64_t steps_done, double loss, double lr);
  // A validation result, printed on its own line.
  void validation(int64_t step, double local_loss, double global_loss, const std::string& extra);
  void finish();

  // Live on a terminal, plain lines otherwise.
  static Mode mode_for_stderr(bool quiet);

 private:
  void print_line(bool final);

  std::string label_;
  int64_t max_steps_;
  Mode mode_;
  std::chrono::steady_clock::time_point start_, last_print_;
  int64_t steps_done_ = 0;
  double loss_ = 0, lr_ = 0;
  int64_t next_line_step_ = 0;
  bool line_open_ = false;
  std::mutex mutex_;
};

}  // namespace exogym::runtime::output
