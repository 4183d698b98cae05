#include "exogym/runtime/dist/launcher.h"

#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/sdk/error.h"

extern char** environ;

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_interrupts{0};
std::atomic<int> g_terminates{0};

extern "C" void on_launcher_signal(int signal) {
  if (signal == SIGINT) {
    g_interrupts.fetch_add(1);
  } else {
    g_terminates.fetch_add(1);
  }
}

// The environment of process `rank`: this one's, with the torchrun
// variables replaced.
std::vector<std::string> child_environment(const LaunchSpec& spec, int rank, int port) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(spec.processes)},
      {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(spec.processes)},
      {"MASTER_ADDR", spec.master_addr},    {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : set) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int launch_local(const LaunchSpec& spec) {
  int port = spec.master_port;
  if (port == 0) {
    port = pick_free_port();
  } else if (!port_is_free(port)) {
    throw sdk::Error("--master-port " + std::to_string(port) +
                     " is already in use on this host: choose another port, or leave --master-port out to pick a "
                     "free one");
  }

  // Everything exec needs is prepared before fork: the child may only call
  // async-signal-safe functions.
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) throw sdk::Error(std::string("cannot find this program's path: ") + std::strerror(errno));
  self[length] = '\0';
  std::vector<std::string> args = spec.args;
  args.insert(args.begin(), self);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::vector<std::string>> envs;
  std::vector<std::vector<char*>> envps;
  for (int rank = 0; rank < spec.processes; ++rank) envs.push_back(child_environment(spec, rank, port));
  for (auto& env : envs) {
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    envps.push_back(std::move(envp));
  }

  // Ctrl-C reaches every process of the terminal's group, children
  // included, and they stop by themselves; SIGTERM is usually sent to this
  // process alone, so it is passed on.
  struct sigaction action {};
  action.sa_handler = on_launcher_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  const pid_t parent = ::getpid();
  std::vector<pid_t> pids(spec.processes, -1);
  std::vector<bool> running(spec.processes, false);
  auto kill_all = [&](int sig) {
    for (int r = 0; r < spec.processes; ++r) {
      if (running[r]) ::kill(pids[r], sig);
    }
  };
  for (int rank = 0; rank < spec.processes; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string error = std::strerror(errno);
      kill_all(SIGKILL);
      throw sdk::Error("cannot start process " + std::to_string(rank) + ": " + error);
    }
    if (pid == 0) {
      // If the launcher dies, its processes must not train on unsupervised.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execve(argv[0], argv.data(), envps[rank].data());
      const char message[] = "exogym-run: cannot exec the worker process\n";
      (void)!::write(2, message, sizeof message - 1);
      ::_exit(127);
    }
    pids[rank] = pid;
    running[rank] = true;
  }

  int first_failed = -1, first_status = 0, left = spec.processes;
  int forwarded_terms = 0;
  Clock::time_point terminate_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  while (left > 0) {
    if (const int terms = g_terminates.load(); terms > forwarded_terms) {
      forwarded_terms = terms;
      kill_all(terms > 1 ? SIGKILL : SIGTERM);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < spec.processes; ++r) {
        if (pids[r] != pid || !running[r]) continue;
        running[r] = false;
        --left;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && first_failed < 0) {
          first_failed = r;
          first_status = status;
          std::fprintf(stderr, "exogym-run: process %d of %d (pid %d) %s%s\n", r, spec.processes, static_cast<int>(pid),
                       describe_exit(status).c_str(), left > 0 ? "; waiting for the others to stop" : "");
          terminate_at = Clock::now() + spec.grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    const auto now = Clock::now();
    if (now >= terminate_at) {
      std::fprintf(stderr, "exogym-run: %d process%s still running %.0f s after process %d failed: terminating\n", left,
                   left == 1 ? "" : "es", std::chrono::duration<double>(spec.grace).count(), first_failed);
      kill_all(SIGTERM);
      kill_all(SIGCONT);  // a stopped (hung) process acts on SIGTERM only once continued
      terminate_at = Clock::time_point::max();
      kill_at = now + std::chrono::seconds(3);
    }
    if (now >= kill_at) {
      kill_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  if (first_failed < 0) return 0;
  if (g_interrupts.load() > 0 || g_terminates.load() > 0) return 130;
  if (WIFEXITED(first_status)) return WEXITSTATUS(first_status);
  return 1;
}

}  // namespace exogym::runtime::dist
