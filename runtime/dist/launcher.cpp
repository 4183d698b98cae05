#include "exogym/runtime/dist/launcher.h"

#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/dist/run_secret.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/sdk/error.h"

extern char** environ;

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_interrupts{0};
std::atomic<int> g_sent_interrupts{0};  // SIGINTs sent by a process (kill -INT), not by the terminal
std::atomic<int> g_terminates{0};

extern "C" void on_launcher_signal(int signal, siginfo_t* info, void*) {
  if (signal == SIGINT) {
    g_interrupts.fetch_add(1);
    // Ctrl-C reaches the whole process group from the kernel (SI_KERNEL);
    // `kill -INT` reaches this process alone, so supervise() passes it on.
    if (info && (info->si_code == SI_USER || info->si_code == SI_QUEUE)) g_sent_interrupts.fetch_add(1);
  } else {
    g_terminates.fetch_add(1);
  }
}

// The environment of process `rank`: this one's, with the torchrun
// variables and the run secret replaced (a secret file is dropped: the
// children share the fresh secret).
std::vector<std::string> child_environment(const LaunchSpec& spec, int rank, int port, const std::string& secret) {
  const std::vector<std::pair<std::string, std::string>> set = {{"RANK", std::to_string(rank)},
                                                                {"WORLD_SIZE", std::to_string(spec.processes)},
                                                                {"LOCAL_RANK", std::to_string(rank)},
                                                                {"LOCAL_WORLD_SIZE", std::to_string(spec.processes)},
                                                                {"MASTER_ADDR", spec.master_addr},
                                                                {"MASTER_PORT", std::to_string(port)},
                                                                {kSecretVariable, secret}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = entry.rfind(std::string(kSecretFileVariable) + "=", 0) == 0;
    for (const auto& [name, value] : set) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

// MASTER_PORT for the processes: the one asked for, if free, or any free one.
int free_master_port(const LaunchSpec& spec) {
  if (spec.master_port == 0) return pick_free_port();
  if (!port_is_free(spec.master_port)) {
    throw sdk::Error("--master-port " + std::to_string(spec.master_port) +
                     " is already in use on this host: choose another port, or leave --master-port out to pick a "
                     "free one");
  }
  return spec.master_port;
}

// Everything exec needs, prepared before fork: the child may only call
// async-signal-safe functions. The pointers point into the strings, so a
// plan stays where it was made.
class ExecPlan {
 public:
  ExecPlan(const LaunchSpec& spec, int port) {
    char self[4096];
    const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) throw sdk::Error(std::string("cannot find this program's path: ") + std::strerror(errno));
    self[length] = '\0';
    args_ = spec.args;
    args_.insert(args_.begin(), self);
    for (auto& a : args_) argv_.push_back(a.data());
    argv_.push_back(nullptr);
    const std::string secret = generate_run_secret();
    for (int rank = 0; rank < spec.processes; ++rank) envs_.push_back(child_environment(spec, rank, port, secret));
    for (auto& env : envs_) {
      std::vector<char*> envp;
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      envps_.push_back(std::move(envp));
    }
  }
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;

  char* const* argv() const { return argv_.data(); }
  char* const* envp(int rank) const { return envps_[rank].data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  std::vector<std::vector<std::string>> envs_;
  std::vector<std::vector<char*>> envps_;
};

// Counts Ctrl-C and SIGTERM while the processes run (on_launcher_signal);
// the previous handlers come back at the end. Ctrl-C reaches every process
// of the terminal's group, children included, and they stop by themselves;
// SIGTERM and `kill -INT` are usually sent to this process alone, so
// supervise() passes them on.
class LauncherSignals {
 public:
  LauncherSignals() {
    struct sigaction action {};
    action.sa_sigaction = on_launcher_signal;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~LauncherSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The worker processes, by rank.
class Workers {
 public:
  explicit Workers(int count) : pids_(count, -1), running_(count, false) {}
  int count() const { return static_cast<int>(pids_.size()); }

  // Forks and execs process `rank`; throws sdk::Error (after killing the
  // ones started) if it cannot.
  void start(int rank, const ExecPlan& plan) {
    const pid_t parent = ::getpid();
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
      ::execve(plan.argv()[0], plan.argv(), plan.envp(rank));
      const char message[] = "exogym-run: cannot exec the worker process\n";
      (void)!::write(2, message, sizeof message - 1);
      ::_exit(127);
    }
    pids_[rank] = pid;
    running_[rank] = true;
  }

  // The rank of `pid` if it was running (it is not any more), else -1.
  int ended(pid_t pid) {
    for (int r = 0; r < count(); ++r) {
      if (pids_[r] == pid && running_[r]) {
        running_[r] = false;
        return r;
      }
    }
    return -1;
  }

  void kill_all(int sig) const {
    for (int r = 0; r < count(); ++r) {
      if (running_[r]) ::kill(pids_[r], sig);
    }
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<bool> running_;
};

// Exit status 130: an interruption, the consequence of a signal, not a cause.
bool interrupted(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 130; }

// Waits for every worker, passing SIGTERM and a sent SIGINT on; after the first failure the
// others get `grace` to stop by themselves, then SIGTERM, then SIGKILL.
// Returns launch_local's exit status.
int supervise(Workers& workers, std::chrono::milliseconds grace) {
  int first_failed = -1, first_status = 0, left = workers.count();
  int forwarded_terms = 0, forwarded_interrupts = 0;
  bool terminating = false;  // the launcher is ending the processes itself
  Clock::time_point terminate_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  while (left > 0) {
    if (const int terms = g_terminates.load(); terms > forwarded_terms) {
      forwarded_terms = terms;
      terminating = true;
      workers.kill_all(terms > 1 ? SIGKILL : SIGTERM);
    }
    if (const int interrupts = g_sent_interrupts.load(); interrupts > forwarded_interrupts) {
      forwarded_interrupts = interrupts;
      terminating = true;
      workers.kill_all(SIGINT);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const int r = workers.ended(pid);
      if (r < 0) continue;
      --left;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && first_failed < 0) {
        first_failed = r;
        first_status = status;
        std::fprintf(stderr, "exogym-run: process %d of %d (pid %d) %s%s\n", r, workers.count(), static_cast<int>(pid),
                     describe_exit(status).c_str(), left > 0 ? "; waiting for the others to stop" : "");
        terminate_at = Clock::now() + grace;
      } else if (!ok && !terminating && g_interrupts.load() == 0 && !interrupted(status)) {
        // Processes that end together are reaped in any order: the one that
        // noticed a peer's death may come first, so the dead one is named
        // too (unless the launcher itself is ending them).
        std::fprintf(stderr, "exogym-run: process %d of %d (pid %d) %s\n", r, workers.count(), static_cast<int>(pid),
                     describe_exit(status).c_str());
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    const auto now = Clock::now();
    if (now >= terminate_at) {
      std::fprintf(stderr, "exogym-run: %d process%s still running %.0f s after process %d failed: terminating\n", left,
                   left == 1 ? "" : "es", std::chrono::duration<double>(grace).count(), first_failed);
      terminating = true;
      workers.kill_all(SIGTERM);
      workers.kill_all(SIGCONT);  // a stopped (hung) process acts on SIGTERM only once continued
      terminate_at = Clock::time_point::max();
      kill_at = now + std::chrono::seconds(3);
    }
    if (now >= kill_at) {
      workers.kill_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (first_failed < 0) return 0;
  if (g_interrupts.load() > 0 || g_terminates.load() > 0) return 130;
  if (WIFEXITED(first_status)) return WEXITSTATUS(first_status);
  return 1;
}

}  // namespace

std::string describe_exit(int status) {
  // 130: the run was interrupted (a signal to this process or to another).
  if (WIFEXITED(status) && WEXITSTATUS(status) == 130) return "was interrupted (exit status 130)";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int launch_local(const LaunchSpec& spec) {
  const ExecPlan plan(spec, free_master_port(spec));
  const LauncherSignals signals;
  Workers workers(spec.processes);
  for (int rank = 0; rank < spec.processes; ++rank) workers.start(rank, plan);
  return supervise(workers, spec.grace);
}

}  // namespace exogym::runtime::dist
