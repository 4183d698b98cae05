#pragma once
// Progress of a run: a live line on a terminal (step, loss, lr, rate, ETA),
// plain log lines otherwise, or JSON lines on stdout for notebooks and
// dashboards (one object per event: "start", "step", "validation",
// "finish"; docs/cli.md lists the fields).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace exogym::runtime::output {

class Progress {
 public:
  enum class Mode { Live, Lines, Jsonl, Quiet };
  // A metric's name and value ("accuracy", 0.97).
  using Metrics = std::vector<std::pair<std::string, double>>;

  // `first_step`: the steps already done when this process started (a
  // resumed run), left out of the rate and the ETA.
  Progress(std::string label, int64_t max_steps, Mode mode, int64_t first_step = 0);
  ~Progress();

  // Called by node 0 after each step (steps completed so far).
  void step(int64_t steps_done, double loss, double lr);
  // A validation result: the losses, and the global model's metrics.
  void validation(int64_t step, double local_loss, double global_loss, const Metrics& global_metrics);
  // The final line (or "finish" event). Without a step reported since the
  // start there is nothing to say: a run that failed in its set-up or in a
  // strategy's init() ends with its error alone, not "step 0/20 loss 0"
  // (JSON lines still get their "finish" event, for readers that pair it
  // with "start").
  void finish();

  // How the nodes compute ("stacked", "per node"), shown at the end of
  // every step line and in the "finish" event. Any thread.
  void set_execution(std::string execution);

  // Live on a terminal, plain lines otherwise.
  static Mode mode_for_stderr(bool quiet);

 private:
  void print_line(bool final);
  void print_json(const char* event, bool final);
  double elapsed_seconds() const;

  std::string label_;
  std::string execution_;
  int64_t max_steps_;
  Mode mode_;
  std::chrono::steady_clock::time_point start_, last_print_;
  int64_t first_step_ = 0, steps_done_ = 0;
  double loss_ = 0, lr_ = 0;
  int64_t next_line_step_ = 0;
  bool line_open_ = false;
  bool stepped_ = false;  // step() was called
  std::mutex mutex_;
};

}  // namespace exogym::runtime::output
