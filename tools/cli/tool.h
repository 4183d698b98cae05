#pragma once
// What every ExoGym command-line tool shares, so that they read and behave
// alike: a CLI11 application with --version, -v/--verbose, --log-level and
// -q/--quiet; one logger; and one mapping from how a tool ended to its exit
// status:
//   0    success
//   1    failure while running (a node failed, a peer was lost, a write failed)
//   2    usage or input error (bad flag, bad manifest, missing or bad file)
//   130  interrupted (Ctrl-C or SIGTERM)
// Every flag takes its value as `--flag value` or `--flag=value`.
#include <spdlog/common.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace exogym::tools {

enum ExitStatus : int { kSuccess = 0, kFailure = 1, kUsageError = 2, kInterrupted = 130 };

// The exit status for an exception a tool's work ended with.
ExitStatus exit_status_of(const std::exception& error);

// The shared verbosity flags, read after parsing.
struct LogOptions {
  int verbose = 0;     // -v: one level more than the default, -vv two, ...
  std::string level;   // --log-level: wins over -v and -q
  bool quiet = false;  // -q: warnings and errors only, and no progress

  // The level to log at, given the tool's default.
  spdlog::level::level_enum resolve(spdlog::level::level_enum fallback = spdlog::level::info) const;
};

class Tool {
 public:
  // `name` as typed ("exogym-run"); `description`: the first line of --help.
  Tool(std::string name, const std::string& description);

  CLI::App& app() { return *app_; }
  const LogOptions& log_options() const { return log_; }

  // How messages name the tool ("exogym-run[1]" in process 1 of a run).
  void set_display_name(std::string name) { display_name_ = std::move(name); }
  // The input file that input errors are about (e.g. the manifest):
  // "exogym-run: m.json: nodes: expected ...".
  void set_input(std::string input) { input_ = std::move(input); }

  // The "exogym" logger at the level the flags ask for, on stderr.
  std::shared_ptr<spdlog::logger> make_logger(const std::string& pattern = "[%H:%M:%S] %^%l%$: %v") const;

  // Parses the command line, then runs `body` and returns its exit status.
  // --help and --version print and return 0; a flag CLI11 refuses is a
  // usage error. An exception from `body` is printed on stderr and becomes
  // the exit status of its kind.
  int run(int argc, char** argv, const std::function<int()>& body);

 private:
  int report(const std::exception& error) const;

  std::string name_, display_name_, input_;
  LogOptions log_;
  std::unique_ptr<CLI::App> app_;
};

// Ends the process with `status` once every output is written and closed:
// flushes stdio and the loggers, then skips static destructors. LibTorch's
// take about 0.1 s tearing down its operator registry at exit, for nothing.
// Under a sanitizer, exits normally, so that its checks at exit still run.
[[noreturn]] void exit_without_teardown(int status);

// "exogym-run 0.1.0 (plugin ABI 4, gcc-12;cxx11abi=1;torch=1.13)".
std::string version_text(const std::string& tool);

}  // namespace exogym::tools
