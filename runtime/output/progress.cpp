#include "exogym/runtime/output/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "exogym/runtime/util/units.h"

namespace exogym::runtime::output {

namespace {

// A live line or a JSON step event at most this often: a fast run would
// otherwise spend its time printing.
constexpr std::chrono::milliseconds kRefresh{200};

// JSON has no NaN or infinity: a diverged loss is written as null.
nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

void emit(const nlohmann::json& event) {
  std::fputs((event.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

Progress::Mode Progress::mode_for_stderr(bool quiet) {
  if (quiet) return Mode::Quiet;
  return isatty(STDERR_FILENO) ? Mode::Live : Mode::Lines;
}

Progress::Progress(std::string label, int64_t max_steps, Mode mode, int64_t first_step)
    : label_(std::move(label)), max_steps_(max_steps), mode_(mode), first_step_(first_step), steps_done_(first_step) {
  start_ = last_print_ = std::chrono::steady_clock::now();
  next_line_step_ = first_step_ + std::max<int64_t>(1, max_steps_ / 10);
  if (mode_ == Mode::Jsonl) emit({{"event", "start"}, {"run", label_}, {"max_steps", max_steps_}});
}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::print_json(const char* event, bool final) {
  const double elapsed = elapsed_seconds();
  const double rate = elapsed > 0 ? (steps_done_ - first_step_) / elapsed : 0;
  nlohmann::json line = {{"event", event},
                         {"run", label_},
                         {"step", steps_done_},
                         {"max_steps", max_steps_},
                         {"loss", finite_or_null(loss_)},
                         {"lr", finite_or_null(lr_)},
                         {"steps_per_second", rate},
                         {"elapsed_seconds", elapsed}};
  if (!final) line["eta_seconds"] = rate > 0 ? nlohmann::json((max_steps_ - steps_done_) / rate) : nullptr;
  if (final && !execution_.empty()) line["execution"] = execution_;
  emit(line);
}

void Progress::print_line(bool final) {
  const double elapsed = elapsed_seconds();
  const double rate = elapsed > 0 ? (steps_done_ - first_step_) / elapsed : 0;
  const double eta = rate > 0 ? (max_steps_ - steps_done_) / rate : -1;
  char line[320];
  std::snprintf(line, sizeof line, "%s step %lld/%lld  loss %.4f  lr %.3g  %.1f steps/s  %s %s%s%s", label_.c_str(),
                static_cast<long long>(steps_done_), static_cast<long long>(max_steps_), loss_, lr_, rate,
                final ? "took" : "ETA", util::format_duration(final ? elapsed : eta).c_str(),
                execution_.empty() ? "" : "  ", execution_.c_str());
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
  stepped_ = true;
  if (mode_ == Mode::Quiet) return;
  auto now = std::chrono::steady_clock::now();
  if (mode_ == Mode::Live || mode_ == Mode::Jsonl) {
    if (now - last_print_ > kRefresh) {
      last_print_ = now;
      mode_ == Mode::Jsonl ? print_json("step", false) : print_line(false);
    }
  } else if (steps_done >= next_line_step_ && steps_done < max_steps_) {
    next_line_step_ += std::max<int64_t>(1, max_steps_ / 10);
    print_line(false);
  }
}

void Progress::set_execution(std::string execution) {
  std::lock_guard<std::mutex> lock(mutex_);
  execution_ = std::move(execution);
}

void Progress::validation(int64_t step, double local_loss, double global_loss, const Metrics& global_metrics) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == Mode::Quiet) return;
  if (mode_ == Mode::Jsonl) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [name, value] : global_metrics) metrics[name] = finite_or_null(value);
    emit({{"event", "validation"},
          {"run", label_},
          {"step", step},
          {"local_loss", finite_or_null(local_loss)},
          {"global_loss", finite_or_null(global_loss)},
          {"global_metrics", metrics}});
    return;
  }
  std::string extra;
  char buffer[96];
  for (const auto& [name, value] : global_metrics) {
    std::snprintf(buffer, sizeof buffer, ", global %s %.4f", name.c_str(), value);
    extra += buffer;
  }
  if (line_open_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s validation @ step %lld: local loss %.4f, global loss %.4f%s\n", label_.c_str(),
               static_cast<long long>(step), local_loss, global_loss, extra.c_str());
  line_open_ = false;
  std::fflush(stderr);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == Mode::Quiet || max_steps_ < 0) return;
  if (mode_ == Mode::Jsonl) {
    print_json("finish", true);
  } else if (stepped_) {
    print_line(true);
  }
  max_steps_ = -1;  // finished: print once
}

}  // namespace exogym::runtime::output
