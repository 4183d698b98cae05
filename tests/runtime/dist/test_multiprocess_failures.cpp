// Runs over several processes that fail: a process killed, hung or failing,
// and processes that cannot meet (a bad RANK, an unreachable master, a busy
// port, disagreeing worlds or manifests). Every process ends with a clear
// error, within the timeout, instead of hanging.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_helpers.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "helpers.h"
#include "testing.h"

using exogym::test::Outcome;
using exogym::test::run_cli;
using exogym::test::run_folder;
using exogym::test::small_manifest;
using exogym::test::spawn;
using exogym::test::TempDir;
using exogym::test::wait_for;
using exogym::test::write_manifest;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Holds a TCP port open (listening) for the lifetime of the object.
class BusyPort {
 public:
  BusyPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~BusyPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Waits (up to a minute) until process 0 has written a row of train.csv
// in the run's folder: every process has joined the rendezvous and trains.
// (A fixed sleep was not enough on a loaded machine: a process signalled
// before it joined left the others waiting for it.) Fails the test, and
// stops the launcher rather than leave it running, if that never comes.
void require_training(const TempDir& dir, pid_t launcher) {
  const auto file = run_folder(dir, "out") / "train.csv";
  for (const auto until = Clock::now() + std::chrono::seconds(60); Clock::now() < until;) {
    std::ifstream in(file);
    std::string header, row;
    if (std::getline(in, header) && std::getline(in, row)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(launcher, SIGTERM);
  FAIL("no row in " << file << " after a minute");
}

}  // namespace

TEST_CASE("a process killed mid-run stops the others with an error naming it, within the timeout",
          "[multiprocess][cli][slow]") {
  TempDir dir("mp-kill");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 200;
  m["strategy"] = {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
                   {"options", {{"fail_node", 2}, {"fail_step", 5}, {"fail_mode", "kill"}}}};
  const auto file = write_manifest(dir, "m", m);
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "5", file.string()}, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code != 0);
  REQUIRE(o.seconds < 30);
  // The launcher names the dead process and how it died; process 0 names
  // the peer it lost.
  REQUIRE_THAT(o.output, Catch::Contains("process 1 of 2") && Catch::Contains("killed by signal 9"));
  REQUIRE_THAT(o.output, Catch::Contains("exogym-run[0]: error:") && Catch::Contains("lost process 1 (nodes 2-3"));
}

TEST_CASE("a hung process is noticed by its silent heartbeat within the timeout", "[multiprocess][cli][slow]") {
  TempDir dir("mp-stop");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 200;
  m["strategy"] = {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
                   {"options", {{"fail_node", 3}, {"fail_step", 4}, {"fail_mode", "stop"}}}};
  const auto file = write_manifest(dir, "m", m);
  // A hang would last until run_cli kills the launcher (120 s); the bound
  // leaves room for a loaded machine, where starting two LibTorch processes
  // alone can take half a minute.
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "3", file.string()}, dir / "log.txt", 120);
  INFO(o.output);
  REQUIRE(o.code != 0);
  REQUIRE(o.seconds < 90);
  REQUIRE_THAT(o.output, Catch::Contains("process 1 (nodes 2-3") && Catch::Contains("no sign of life for 3 s"));
  // The launcher ended the stopped process itself.
  REQUIRE_THAT(o.output, Catch::Contains("terminating"));
  // Continued, the stopped process does not blame process 0's host for the
  // silence that was its own.
  CHECK_THAT(o.output, !Catch::Contains("process 0's host is unreachable"));
}

TEST_CASE("a node error in one process ends every process with that error", "[multiprocess][cli]") {
  TempDir dir("mp-throw");
  json m = small_manifest(4);
  m["strategy"] = {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
                   {"options", {{"fail_node", 3}, {"fail_step", 2}}}};
  const auto file = write_manifest(dir, "m", m);
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "20", file.string()}, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code == 1);
  REQUIRE(o.seconds < 30);
  REQUIRE_THAT(o.output, Catch::Contains("exogym-run[1]: error: node 3, step 2, step of strategy") &&
                             Catch::Contains("deliberate failure for the test"));
  REQUIRE_THAT(o.output, Catch::Contains("exogym-run[0]: error:") && Catch::Contains("process 1 (nodes 2-3") &&
                             Catch::Contains("exited with status 1"));
}

TEST_CASE("a bad RANK, too few nodes, an unreachable master and a busy port are clear errors", "[multiprocess][cli]") {
  TempDir dir("mp-world");
  const auto file = write_manifest(dir, "m", small_manifest(2));

  SECTION("RANK outside WORLD_SIZE") {
    const Outcome o = run_cli({file.string()}, dir / "log.txt", 30, {{"RANK", "2"}, {"WORLD_SIZE", "2"}});
    REQUIRE(o.code == 2);
    REQUIRE_THAT(o.output, Catch::Contains("RANK: rank 2 does not exist in a world of 2 processes"));
  }
  SECTION("more processes than nodes") {
    const Outcome o = run_cli({"--nproc", "3", file.string()}, dir / "log.txt", 30);
    REQUIRE(o.code == 2);
    REQUIRE_THAT(o.output, Catch::Contains("nodes: the run has 2 nodes but 3 processes"));
  }
  SECTION("an unreachable master") {
    const int closed = exogym::runtime::dist::pick_free_port();
    const Outcome o = run_cli({"--timeout", "1", file.string()}, dir / "log.txt", 30,
                              {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", std::to_string(closed)}});
    REQUIRE(o.code == 1);
    REQUIRE_THAT(o.output,
                 Catch::Contains("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(closed)) &&
                     Catch::Contains("within 1 s"));
    REQUIRE(o.seconds < 20);
  }
  SECTION("a port already in use") {
    BusyPort busy;
    const Outcome o = run_cli({"--timeout", "5", file.string()}, dir / "log.txt", 30,
                              {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", std::to_string(busy.port())}});
    REQUIRE(o.code == 1);
    REQUIRE_THAT(o.output, Catch::Contains("MASTER_PORT " + std::to_string(busy.port()) + " is already in use"));
    const Outcome n =
        run_cli({"--nproc", "2", "--master-port", std::to_string(busy.port()), file.string()}, dir / "log2.txt", 30);
    REQUIRE(n.code == 1);
    REQUIRE_THAT(n.output, Catch::Contains("--master-port " + std::to_string(busy.port()) + " is already in use"));
  }
}

TEST_CASE("processes that disagree on the world or the manifest, or share a rank, are clear errors",
          "[multiprocess][cli][slow]") {
  TempDir dir("mp-disagree");
  const auto file = write_manifest(dir, "m", small_manifest(2));

  SECTION("mismatched world sizes") {
    const int port = exogym::runtime::dist::pick_free_port();
    const auto started = Clock::now();
    const std::map<std::string, std::string> common = {{"MASTER_PORT", std::to_string(port)}};
    auto env0 = common, env1 = common;
    env0.insert({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    env1.insert({{"RANK", "1"}, {"WORLD_SIZE", "3"}});
    const pid_t p0 = spawn({"--timeout", "10", file.string()}, env0, dir / "log0.txt");
    const pid_t p1 = spawn({"--timeout", "10", file.string()}, env1, dir / "log1.txt");
    const Outcome o0 = wait_for(p0, dir / "log0.txt", started, 60);
    const Outcome o1 = wait_for(p1, dir / "log1.txt", started, 60);
    INFO(o0.output << "\n---\n" << o1.output);
    REQUIRE(o0.code == 1);
    REQUIRE(o1.code == 1);
    REQUIRE_THAT(o1.output, Catch::Contains("WORLD_SIZE mismatch: process 0") && Catch::Contains("WORLD_SIZE 2"));
    REQUIRE_THAT(o0.output, Catch::Contains("WORLD_SIZE mismatch") || Catch::Contains("gave up"));
  }
  SECTION("processes running different manifests") {
    const int port = exogym::runtime::dist::pick_free_port();
    const auto started = Clock::now();
    const std::map<std::string, std::string> env = {{"WORLD_SIZE", "2"}, {"MASTER_PORT", std::to_string(port)}};
    auto env0 = env, env1 = env;
    env0["RANK"] = "0";
    env1["RANK"] = "1";
    const pid_t p0 = spawn({"--timeout", "10", file.string()}, env0, dir / "log0.txt");
    const pid_t p1 = spawn({"--timeout", "10", "--set", "train.max_steps=7", file.string()}, env1, dir / "log1.txt");
    const Outcome o0 = wait_for(p0, dir / "log0.txt", started, 60);
    const Outcome o1 = wait_for(p1, dir / "log1.txt", started, 60);
    INFO(o0.output << "\n---\n" << o1.output);
    REQUIRE(o0.code == 1);
    REQUIRE(o1.code == 1);
    REQUIRE_THAT(o1.output, Catch::Contains("process 0 (pid") && Catch::Contains("runs a different manifest"));
  }
  SECTION("a rank claimed twice") {
    const int port = exogym::runtime::dist::pick_free_port();
    const auto started = Clock::now();
    const std::map<std::string, std::string> env = {{"WORLD_SIZE", "3"}, {"MASTER_PORT", std::to_string(port)}};
    auto env0 = env, env1 = env;
    env0["RANK"] = "0";
    env1["RANK"] = "1";
    const pid_t p0 = spawn({"--timeout", "3", file.string()}, env0, dir / "log0.txt");
    const pid_t p1 = spawn({"--timeout", "3", file.string()}, env1, dir / "log1.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const pid_t p1b = spawn({"--timeout", "3", file.string()}, env1, dir / "log1b.txt");
    const Outcome o0 = wait_for(p0, dir / "log0.txt", started, 60);
    const Outcome o1 = wait_for(p1, dir / "log1.txt", started, 60);
    const Outcome o1b = wait_for(p1b, dir / "log1b.txt", started, 60);
    INFO(o0.output << "\n---\n" << o1.output << "\n---\n" << o1b.output);
    // One of the two rank-1 processes finds the rank taken; every process
    // ends with an error (rank 2 never comes).
    REQUIRE_THAT(o1.output + o1b.output, Catch::Contains("RANK 1 is already taken"));
    REQUIRE(o0.code != 0);
    REQUIRE_THAT(o0.output, Catch::Contains("for process 2 to join"));
  }
}

TEST_CASE("SIGTERM or kill -INT to the launcher stops every process it started, with exit status 130",
          "[multiprocess][cli]") {
  // SIGINT sent to the launcher alone, unlike Ctrl-C, which the terminal
  // sends to every process of the group.
  const int signal = GENERATE(SIGTERM, SIGINT);
  TempDir dir("mp-term");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 1000000;  // runs until stopped
  const auto file = write_manifest(dir, "m", m);
  const auto started = Clock::now();
  const pid_t launcher = spawn({"--quiet", "--nproc", "2", "--timeout", "20", file.string()}, {}, dir / "log.txt");
  // The launcher's processes, once both run.
  const std::string children = "/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children";
  std::vector<pid_t> workers;
  while (workers.size() < 2 && Clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(children);
    workers.clear();
    for (pid_t pid; in >> pid;) workers.push_back(pid);
  }
  REQUIRE(workers.size() == 2);
  require_training(dir, launcher);
  ::kill(launcher, signal);
  const Outcome o = wait_for(launcher, dir / "log.txt", started, 60);
  INFO(strsignal(signal) << "\n" << o.output);
  REQUIRE(o.code == 130);
  // Passed on at once, not after the grace period for failed processes.
  REQUIRE_THAT(o.output, !Catch::Contains("terminating"));
  for (const pid_t pid : workers) REQUIRE(::kill(pid, 0) == -1);  // ended and reaped by the launcher
}

TEST_CASE("SIGTERM to one process alone ends the run as interrupted, exit 130, naming that process",
          "[multiprocess][cli]") {
  TempDir dir("mp-term-one");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 1000000;  // runs until stopped; no checkpoints
  const auto file = write_manifest(dir, "m", m);
  const auto started = Clock::now();
  const pid_t launcher = spawn({"--quiet", "--nproc", "2", "--timeout", "20", file.string()}, {}, dir / "log.txt");
  const std::string children = "/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children";
  pid_t rank1 = 0;
  while (rank1 == 0 && Clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(children);
    for (pid_t pid; in >> pid;) {
      std::ifstream variables("/proc/" + std::to_string(pid) + "/environ");
      // NUL-separated NAME=value entries.
      const std::string text = std::string(1, '\0') + std::string((std::istreambuf_iterator<char>(variables)),
                                                                  std::istreambuf_iterator<char>());
      if (text.find(std::string("\0RANK=1\0", 8)) != std::string::npos) rank1 = pid;
    }
  }
  REQUIRE(rank1 != 0);
  require_training(dir, launcher);
  ::kill(rank1, SIGTERM);
  const Outcome o = wait_for(launcher, dir / "log.txt", started, 60);
  INFO(o.output);
  CHECK(o.code == 130);
  // Process 0 names the process the signal reached; nobody reports a failure.
  CHECK_THAT(o.output, Catch::Contains("exogym-run[0]: stopped: ") && Catch::Contains("process 1 (nodes 2-3") &&
                           Catch::Contains("interrupted by a signal"));
  CHECK_THAT(o.output, !Catch::Contains("error:") && !Catch::Contains("exited with status 1"));
}
