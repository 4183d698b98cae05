#include "bench/harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "bench/child.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/train/cluster.h"

namespace exogym::bench {

using nlohmann::json;

namespace {

// What the child writes to `fd`, until it closes it.
std::string read_all(int fd) {
  std::string text;
  std::array<char, 4096> buffer;
  for (ssize_t n; (n = read(fd, buffer.data(), buffer.size())) > 0;) text.append(buffer.data(), n);
  return text;
}

}  // namespace

json measure(const BenchOptions& options, json spec) {
  if (!options.plugin_path.empty()) spec["plugin_path"] = options.plugin_path;
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const std::string arg = spec.dump();
    execl(self.c_str(), self.c_str(), "--child", arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  const std::string text = read_all(out[0]);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto line = text.rfind(kResultPrefix);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line == std::string::npos) {
    std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exit status " + std::to_string(WEXITSTATUS(status));
    throw std::runtime_error("measurement " + spec.dump() + " failed (" + why + ")");
  }
  return json::parse(text.substr(line + std::string(kResultPrefix).size()));
}

double fastest(const std::vector<double>& values) { return *std::min_element(values.begin(), values.end()); }

runtime::threads::ThreadPlan simulator_threads(int nodes, int parallelism) {
  runtime::threads::ThreadRequest request;
  request.nodes = nodes;
  request.parallelism = parallelism;
  return runtime::threads::plan_threads(request, runtime::host::available_cores());
}

}  // namespace exogym::bench
