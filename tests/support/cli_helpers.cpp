#include "cli_helpers.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "testing.h"

extern char** environ;

namespace exogym::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path exogym_run() { return fs::path(EXOGYM_BINARY_DIR) / "bin" / "exogym-run"; }

pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, const fs::path& log) {
  std::vector<std::string> argv_s = {exogym_run().string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  static const char* kReset[] = {"RANK",       "WORLD_SIZE",       "MASTER_ADDR",       "MASTER_PORT",
                                 "LOCAL_RANK", "LOCAL_WORLD_SIZE", "EXOGYM_RUN_SECRET", "EXOGYM_RUN_SECRET_FILE"};
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool drop = false;
    for (const char* name : kReset) drop = drop || entry.rfind(std::string(name) + "=", 0) == 0;
    for (const auto& [name, value] : env) drop = drop || entry.rfind(name + "=", 0) == 0;
    if (!drop) env_s.push_back(entry);
  }
  for (const auto& [name, value] : env) {
    if (!value.empty()) env_s.push_back(name + "=" + value);
  }
  if (env.count("EXOGYM_RUN_SECRET") == 0) env_s.push_back("EXOGYM_RUN_SECRET=" + std::string(kTestSecret));
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_s = log.string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* out = std::freopen(log_s.c_str(), "w", stdout);
    if (!out) ::_exit(126);
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

Outcome wait_for(pid_t pid, const fs::path& log, Clock::time_point started, double limit) {
  Outcome outcome;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::duration<double>(Clock::now() - started).count() > limit) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("exogym-run did not end within " << limit << " s; output:\n" << read_text(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  outcome.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.output = read_text(log);
  return outcome;
}

Outcome run_cli(const std::vector<std::string>& args, const fs::path& log, double limit,
                const std::map<std::string, std::string>& env) {
  const auto started = Clock::now();
  return wait_for(spawn(args, env, log), log, started, limit);
}

fs::path write_manifest(const TempDir& dir, const std::string& name, const nlohmann::json& m) {
  const fs::path file = dir / (name + ".json");
  std::ofstream(file) << m.dump(2);
  return file;
}

fs::path run_folder(const TempDir& dir, const std::string& out) { return dir / out / "test"; }

fs::path run_layout(const TempDir& dir, nlohmann::json m, const std::string& out, std::vector<std::string> args) {
  m["output"]["dir"] = out;
  args.insert(args.end(), {"--quiet", "--timeout", "20", write_manifest(dir, out, m).string()});
  const Outcome o = run_cli(args, dir / (out + ".log"), 120);
  INFO(o.output);
  REQUIRE(o.code == 0);
  return run_folder(dir, out);
}

}  // namespace exogym::test
