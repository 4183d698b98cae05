#pragma once
// exogym-run as a child process of a test: start it with arguments and
// environment variables, wait for it with a time limit, read what it printed.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "helpers.h"

namespace exogym::test {

struct Outcome {
  int code = -1;  // exit status; 128 + signal when killed
  std::string output;
  double seconds = 0;
};

// The build tree's exogym-run.
std::filesystem::path exogym_run();

// The run secret every process spawn() starts holds, unless `env` sets
// EXOGYM_RUN_SECRET (an empty value: none).
inline constexpr const char* kTestSecret = "exogym-tests";

// Starts exogym-run with `args`; `env` replaces variables of this
// environment (an empty value removes one), and the torchrun variables and
// run secret of this environment are dropped. Output goes to `log`.
pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
            const std::filesystem::path& log);

// Waits for `pid` at most `limit` seconds from `started`; a process still
// running then is killed and the test fails.
Outcome wait_for(pid_t pid, const std::filesystem::path& log, std::chrono::steady_clock::time_point started,
                 double limit);

// spawn() and wait_for() in one.
Outcome run_cli(const std::vector<std::string>& args, const std::filesystem::path& log, double limit = 120,
                const std::map<std::string, std::string>& env = {});

// Writes `m` to dir/<name>.json.
std::filesystem::path write_manifest(const TempDir& dir, const std::string& name, const nlohmann::json& m);

// The run folder of a manifest whose output.dir is `out` and name "test".
std::filesystem::path run_folder(const TempDir& dir, const std::string& out);

// Runs `m` through exogym-run with `args` (say {"--nproc", "2"}) into
// output folder `out`, REQUIREs success, and returns the run folder.
std::filesystem::path run_layout(const TempDir& dir, nlohmann::json m, const std::string& out,
                                 std::vector<std::string> args);

}  // namespace exogym::test
