#include "exogym/runtime/output/progress.h"

#include "exogym/runtime/manifest/units.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace exogym::runtime::output {

Progress::Mode Progress::mode_for_stderr(bool quiet) {
  if (quiet) return Mode::Quiet;
  return isatty(STDERR_FILENO) ? Mode::Live : Mode::Lines;
}

Progress::Progress(std::string label, int64_t max_steps, Mode mode)
    : label_(std::move(label)), max_steps_(max_steps), mode_(mode) {
  start_ = last_print_ = std::chrono::steady_clock::now();
  next_line_step_ = std::max<int64_t>(1, max_steps_ / 10);
}

Progress::~Progress() { finish(); }

void Progress::print_line(bool final) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? steps_done_ / elapsed : 0;
  const double eta = rate > 0 ? (max_steps_ - steps_done_) / rate : -1;
  char line[256];
  std::snprintf(line, sizeof line, "%s step %lld/%lld  loss %.4f  lr %.3g  %.1f steps/s  %s %s", label_.c_str(),
                static_cast<long long>(steps_done_), static_cast<long long>(max_steps_), loss_, lr_, rate,
                final ? "took" : "ETA", manifest::format_duration(final ? elapsed : eta).c_str());
  if (mode_ == Mode::Live) {
    std::fprintf(stderr, "\r\033[K%s", line);
    line_open_ = true;
    if (final) {
      std::fputc('\n', stderr);
      line_open_ = false;
    }
  } else {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

void Progress::step(int64_t steps_done, double loss, double lr) {
  std::lock_guard<std::mutex> lock(mutex_);
  steps_done_ = steps_done;
  loss_ = loss;
  lr_ = lr;
  if (mode_ == Mode::Quiet) return;
  auto now = std::chrono::steady_clock::now();
  if (mode_ == Mode::Live) {
    if (now - last_print_ > std::chrono::milliseconds(200)) {
      last_print_ = now;
      print_line(false);
    }
  } else if (steps_done >= next_line_step_ && steps_done < max_steps_) {
    next_line_step_ += std::max<int64_t>(1, max_steps_ / 10);
    print_line(false);
  }
}

void Progress::validation(int64_t step, double local_loss, double global_loss, const std::string& extra) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == Mode::Quiet) return;
  if (line_open_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s validation @ step %lld: local loss %.4f, global loss %.4f%s\n", label_.c_str(),
               static_cast<long long>(step), local_loss, global_loss, extra.c_str());
  line_open_ = false;
  std::fflush(stderr);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == Mode::Quiet || max_steps_ < 0) return;
  print_line(true);
  max_steps_ = -1;  // finished: print once
}

}  // namespace exogym::runtime::output
