// Runs spread over several processes: the hierarchical collectives (several
// ProcessMeshes in threads of this test, as separate processes would hold
// them), and exogym-run with --nproc or the torchrun variables, on loopback:
// the same model.pt, bytes and simulated time as one process, and failures
// that end every process with a clear error instead of a hang.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "exogym/runtime/cluster/cluster.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "helpers.h"

extern char** environ;

namespace fs = std::filesystem;
using exogym::runtime::sim::ClockExchange;
using exogym::runtime::cluster::Cluster;
using exogym::runtime::dist::node_block;
using exogym::runtime::cluster::NodeSlot;
using exogym::runtime::dist::ProcessMesh;
using exogym::runtime::dist::WorldSpec;
using exogym::sdk::ReduceOp;
using exogym::test::load_model_pt;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Runs body(rank, comm) on K nodes spread over P meshes, one thread per
// "process", each with its own ProcessMesh and Cluster. Throws the first
// process's error (by process order) if any failed. A minute at most.
void run_meshes(int P, int K, bool exact, const std::function<void(int, exogym::sdk::Communicator&)>& body,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int port = exogym::runtime::dist::pick_free_port();
  std::vector<std::string> errors(P);
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<ProcessMesh*> meshes(P, nullptr);
  int done = 0;
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] {
      try {
        WorldSpec world;
        world.size = P;
        world.rank = p;
        world.master_port = port;
        world.timeout = timeout;
        ProcessMesh mesh(world, "test");
        {
          std::lock_guard<std::mutex> lock(mutex);
          meshes[p] = &mesh;
        }
        try {
          Cluster cluster(K, 2, mesh, node_block(K, P, p), nullptr, exact);
          cluster.run([&](int rank, NodeSlot& slot) {
            at::set_num_threads(1);
            auto comm = cluster.communicator(rank, &slot);
            slot.acquire();
            body(rank, *comm);
          });
          mesh.finish();
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          meshes[p] = nullptr;
          throw;
        }
        std::lock_guard<std::mutex> lock(mutex);
        meshes[p] = nullptr;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        errors[p] = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++done;
      cv.notify_all();
    });
  }
  bool finished;
  {
    std::unique_lock<std::mutex> lock(mutex);
    finished = cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == P; });
    if (!finished) {
      for (auto* mesh : meshes) {
        if (mesh) mesh->fail("test timeout");
      }
    }
  }
  for (auto& t : threads) t.join();
  if (!finished) FAIL("the processes did not finish within 60 s");
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
}

// Random values that differ per node, from a generator seeded by the rank.
at::Tensor node_values(int rank, at::IntArrayRef shape) {
  auto gen = at::detail::createCPUGenerator(1000 + rank);
  return at::randn(shape, gen, at::kFloat);
}

// --- exogym-run as a child process ---

struct Outcome {
  int code = -1;  // exit status; 128 + signal when killed
  std::string output;
  double seconds = 0;
};

fs::path exogym_run() { return fs::path(EXOGYM_BINARY_DIR) / "bin" / "exogym-run"; }

// Starts exogym-run with `args`; `env` replaces variables of this
// environment (an empty value removes one). Output goes to `log`.
pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, const fs::path& log) {
  std::vector<std::string> argv_s = {exogym_run().string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  static const char* kReset[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
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

// Waits for `pid` at most `limit` seconds from `started`; a process still
// running then is killed and the test fails.
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

Outcome run_cli(const std::vector<std::string>& args, const fs::path& log, double limit = 120,
                const std::map<std::string, std::string>& env = {}) {
  const auto started = Clock::now();
  return wait_for(spawn(args, env, log), log, started, limit);
}

fs::path write_manifest(const TempDir& dir, const std::string& name, const json& m) {
  const fs::path file = dir / (name + ".json");
  std::ofstream(file) << m.dump(2);
  return file;
}

// The run folder of a manifest whose output.dir is `out` and name "test".
fs::path run_folder(const TempDir& dir, const std::string& out) { return dir / out / "test"; }

json diloco_manifest() {
  json m = small_manifest(4);
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 5}, {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}}}};
  return m;
}

// max |a - b| relative to the largest |b|, over every tensor.
double relative_difference(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  double scale = 0;
  for (const auto& [name, t] : b) scale = std::max(scale, t.abs().max().item<double>());
  return exogym::test::max_abs_diff(a, b) / std::max(scale, 1e-30);
}

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

}  // namespace

// --- the hierarchical collectives ---

TEST_CASE("hierarchical collectives over 2 processes give every node the right values", "[multiprocess]") {
  // 5 nodes over 2 processes: blocks of 2 and 3 nodes.
  const int K = 5;
  std::vector<std::vector<at::Tensor>> results(K);
  std::vector<std::vector<std::vector<at::Tensor>>> gathered(K);
  run_meshes(2, K, false, [&](int rank, exogym::sdk::Communicator& comm) {
    REQUIRE(comm.size() == K);
    REQUIRE(comm.rank() == rank);
    std::vector<at::Tensor> mine;
    for (auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max}) {
      at::Tensor f = at::tensor({rank + 1.0, -(rank + 1.0), 10.0 * rank}, at::kFloat);
      at::Tensor d = at::tensor({rank * 0.5, 3.0}, at::kDouble);
      at::Tensor i = at::tensor({int64_t{rank}, int64_t{7}}, at::kLong);
      // A non-contiguous view: the result must land in it.
      at::Tensor matrix = at::arange(6, at::kFloat).reshape({2, 3}) * (rank + 1);
      std::vector<at::Tensor> list{f, d, i, matrix.t()};
      comm.all_reduce(list, op);
      mine.push_back(f);
      mine.push_back(d);
      mine.push_back(i);
      mine.push_back(matrix);
    }
    for (int root : {1, 3}) {
      at::Tensor t = at::full({4}, static_cast<double>(rank), at::kDouble);
      comm.broadcast(t, root);
      mine.push_back(t);
    }
    // Shapes and dtypes differ between ranks.
    gathered[rank] = comm.all_gather({at::full({rank + 1}, rank, at::kLong), at::ones({2, rank}, at::kFloat)});
    comm.barrier();
    results[rank] = mine;
  });
  // Sums of 1..5, of 0..4 etc.
  const std::vector<std::vector<at::Tensor>> expected_by_op = {
      {at::tensor({15.0, -15.0, 100.0}, at::kFloat), at::tensor({5.0, 15.0}, at::kDouble),
       at::tensor({int64_t{10}, int64_t{35}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 15},
      {at::tensor({3.0, -3.0, 20.0}, at::kFloat), at::tensor({1.0, 3.0}, at::kDouble),
       at::tensor({int64_t{2}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 3},
      {at::tensor({1.0, -5.0, 0.0}, at::kFloat), at::tensor({0.0, 3.0}, at::kDouble),
       at::tensor({int64_t{0}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3})},
      {at::tensor({5.0, -1.0, 40.0}, at::kFloat), at::tensor({2.0, 3.0}, at::kDouble),
       at::tensor({int64_t{4}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 5}};
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    REQUIRE(results[r].size() == 18);
    for (size_t op = 0; op < 4; ++op) {
      for (size_t t = 0; t < 4; ++t) {
        INFO("op " << op << " tensor " << t);
        REQUIRE(at::equal(results[r][op * 4 + t], expected_by_op[op][t]));
      }
    }
    REQUIRE(at::equal(results[r][16], at::full({4}, 1.0, at::kDouble)));
    REQUIRE(at::equal(results[r][17], at::full({4}, 3.0, at::kDouble)));
    REQUIRE(gathered[r].size() == static_cast<size_t>(K));
    for (int from = 0; from < K; ++from) {
      REQUIRE(at::equal(gathered[r][from][0], at::full({from + 1}, from, at::kLong)));
      REQUIRE(at::equal(gathered[r][from][1], at::ones({2, from}, at::kFloat)));
    }
  }
}

TEST_CASE("exact hierarchical sums match the in-process backend bit for bit, and partial sums agree everywhere",
          "[multiprocess]") {
  const int K = 6;
  const std::vector<int64_t> shape = {1000, 37};
  std::vector<at::Tensor> in_process(K), exact(K), partial(K);
  auto body = [&](std::vector<at::Tensor>& out) {
    return [&](int rank, exogym::sdk::Communicator& comm) {
      std::vector<at::Tensor> list{node_values(rank, shape), node_values(rank + 100, {5})};
      comm.all_reduce(list, ReduceOp::Avg);
      out[rank] = list[0];
    };
  };
  exogym::test::run_nodes(K, 2, body(in_process));
  run_meshes(3, K, true, body(exact));
  run_meshes(3, K, false, body(partial));
  for (int r = 0; r < K; ++r) {
    REQUIRE(at::equal(exact[r], in_process[0]));
    REQUIRE(at::equal(partial[r], partial[0]));  // every node of every process holds the same bits
  }
  // Partial sums differ from rank-ordered ones only by association.
  const double scale = in_process[0].abs().max().item<double>();
  REQUIRE((partial[0] - in_process[0]).abs().max().item<double>() <= 1e-6 * scale);
}

TEST_CASE("four processes with one node each reduce, broadcast and gather", "[multiprocess]") {
  const int K = 4;
  std::vector<at::Tensor> sums(K), roots(K);
  std::vector<std::vector<at::Tensor>> gathered(K);
  run_meshes(4, K, false, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::full({3}, static_cast<int64_t>(1) << rank, at::kLong);
    comm.all_reduce(t, ReduceOp::Sum);
    sums[rank] = t;
    at::Tensor b = at::full({2}, static_cast<float>(rank), at::kFloat);
    comm.broadcast(b, 2);
    roots[rank] = b;
    gathered[rank] = comm.all_gather(at::full({1}, rank * 10, at::kLong));
  });
  for (int r = 0; r < K; ++r) {
    REQUIRE(at::equal(sums[r], at::full({3}, 15, at::kLong)));
    REQUIRE(at::equal(roots[r], at::full({2}, 2.0f)));
    for (int from = 0; from < K; ++from) REQUIRE(gathered[r][from].item<int64_t>() == from * 10);
  }
}

TEST_CASE("a collective mismatch between processes is an error naming both, not a hang", "[multiprocess]") {
  REQUIRE_THROWS_WITH(run_meshes(2, 4, false,
                                 [&](int rank, exogym::sdk::Communicator& comm) {
                                   at::Tensor t = at::ones({3});
                                   if (rank < 2) {
                                     comm.all_reduce(t, ReduceOp::Sum);
                                   } else {
                                     comm.broadcast(t, 0);
                                   }
                                 }),
                      Catch::Contains("collective mismatch between processes") && Catch::Contains("process 1") &&
                          Catch::Contains("broadcast") && Catch::Contains("all_reduce"));
}

TEST_CASE("a node error in one process stops the others with its message", "[multiprocess]") {
  const auto started = Clock::now();
  try {
    run_meshes(2, 4, false, [&](int rank, exogym::sdk::Communicator& comm) {
      for (int i = 0; i < 5; ++i) {
        if (rank == 3 && i == 2) throw exogym::sdk::Error("node 3 gives up");
        at::Tensor t = at::ones({3});
        comm.all_reduce(t, ReduceOp::Sum);
      }
    });
    FAIL("the run should have failed");
  } catch (const std::runtime_error& e) {
    // Process 0 reports first: its nodes were stopped by process 1's failure.
    REQUIRE_THAT(e.what(), Catch::Contains("process 1 (nodes 2-3") && Catch::Contains("failed") &&
                               Catch::Contains("node 3 gives up"));
  }
  REQUIRE(std::chrono::duration<double>(Clock::now() - started).count() < 30);
}

TEST_CASE("the clock exchange shares the latest arrival across processes", "[multiprocess]") {
  ClockExchange clocks(4);
  // This process hosts nodes 2 and 3; runtime collectives post nothing.
  REQUIRE_FALSE(clocks.take_local(2, 2).has_value());
  clocks.post(2, 0, 1.5);
  clocks.post(3, 0, 2.5);
  auto local = clocks.take_local(2, 2);
  REQUIRE(local.has_value());
  REQUIRE(local->sequence == 0);
  REQUIRE(local->latest == 2.5);
  REQUIRE_FALSE(clocks.take_local(2, 2).has_value());  // taken once
  REQUIRE(clocks.latest(0) == 2.5);
  clocks.share_latest(0, 4.0);  // a node of another process arrived later
  REQUIRE(clocks.latest(0) == 4.0);
  clocks.post(2, 1, 5.0);
  clocks.post(3, 1, 6.0);
  REQUIRE(clocks.take_local(2, 2)->latest == 6.0);
  clocks.share_latest(1, 6.0);
  REQUIRE(clocks.latest(1) == 6.0);
}

// --- exogym-run over several processes ---

TEST_CASE("exogym-run --nproc 2 and 4 give the single-process model.pt, bytes and simulated time",
          "[multiprocess][cli][slow]") {
  for (const auto& [strategy, manifest] :
       std::vector<std::pair<std::string, json>>{{"allreduce", small_manifest(4)}, {"diloco", diloco_manifest()}}) {
    INFO("strategy " << strategy);
    TempDir dir("mp-" + strategy);
    json m = manifest;
    m["compute"] = {{"step_time", "50ms"}};
    std::map<std::string, fs::path> folders;
    for (const std::string layout : {"1", "2", "4", "2-partial", "4-partial"}) {
      const std::string out = "out" + layout;
      m["output"]["dir"] = out;
      const auto file = write_manifest(dir, "m" + layout, m);
      std::vector<std::string> args = {"--quiet", file.string()};
      if (layout != "1") args = {"--quiet", "--nproc", layout.substr(0, 1), "--timeout", "20", file.string()};
      if (layout.find("partial") != std::string::npos) args.insert(args.begin(), "--partial-reduce");
      const Outcome o = run_cli(args, dir / ("log" + layout + ".txt"));
      INFO(o.output);
      REQUIRE(o.code == 0);
      folders[layout] = run_folder(dir, out);
    }
    const fs::path single = folders["1"];
    const auto single_model = load_model_pt(single / "model.pt");
    const auto single_summary = json::parse(read_text(single / "summary.json"));
    for (const std::string layout : {"2", "4", "2-partial", "4-partial"}) {
      INFO("--nproc " << layout);
      const fs::path folder = folders[layout];
      // The same files as a single-process run.
      for (const char* file :
           {"config.json", "train.csv", "validation.csv", "comm.csv", "metrics.csv", "summary.json", "model.pt"}) {
        INFO(file);
        REQUIRE(fs::exists(folder / file));
      }
      const auto model = load_model_pt(folder / "model.pt");
      if (layout.find("partial") == std::string::npos) {
        // Every process sums all nodes in rank order: the same bits.
        REQUIRE(exogym::test::bit_identical(model, single_model));
        REQUIRE(read_text(folder / "train.csv") == read_text(single / "train.csv"));
        REQUIRE(read_text(folder / "validation.csv") == read_text(single / "validation.csv"));
      } else {
        // Per-process partial sums change the association only.
        REQUIRE(relative_difference(model, single_model) <= 1e-6);
      }
      const auto summary = json::parse(read_text(folder / "summary.json"));
      // Bytes: exactly what the same virtual nodes send in one process.
      REQUIRE(summary["communication"] == single_summary["communication"]);
      REQUIRE(summary["communication"]["bytes_sent_total"].get<double>() > 0);
      // Simulated time with a fixed step time: exactly the same clocks.
      REQUIRE(summary["simulated"]["time_s"] == single_summary["simulated"]["time_s"]);
      REQUIRE(summary["simulated"]["waiting_s"] == single_summary["simulated"]["waiting_s"]);
      REQUIRE(read_text(folder / "comm.csv") == read_text(single / "comm.csv"));
      const auto train = read_csv(folder / "train.csv");
      const auto single_train = read_csv(single / "train.csv");
      REQUIRE(train.size() == single_train.size());
      for (size_t i = 0; i < train.size(); ++i) {
        REQUIRE(train[i].at("sim_time_s") == single_train[i].at("sim_time_s"));
        REQUIRE(train[i].at("bytes_sent") == single_train[i].at("bytes_sent"));
        REQUIRE(std::stod(train[i].at("train_loss")) ==
                Approx(std::stod(single_train[i].at("train_loss"))).epsilon(1e-5));
      }
      // The global evaluation (node 1, in process 0 or 1) and node 0's log work.
      const auto validation = read_csv(folder / "validation.csv");
      const auto single_validation = read_csv(single / "validation.csv");
      REQUIRE(validation.size() == single_validation.size());
      for (size_t i = 0; i < validation.size(); ++i) {
        REQUIRE(std::stod(validation[i].at("global_loss")) ==
                Approx(std::stod(single_validation[i].at("global_loss"))).epsilon(1e-5));
        REQUIRE(validation[i].at("sim_time_s") == single_validation[i].at("sim_time_s"));
      }
      const auto runtime = json::parse(read_text(folder / "config.json"))["runtime"];
      REQUIRE(runtime["processes"] == std::stoi(layout.substr(0, 1)));
      REQUIRE(runtime["reduce"] == (layout.find("partial") == std::string::npos ? "exact" : "partial"));
      // Only process 0 wrote: one run folder.
      REQUIRE(std::distance(fs::directory_iterator(folder.parent_path()), fs::directory_iterator()) == 1);
    }
  }
}

TEST_CASE("runs with --partial-reduce over the same process count are bit-identical", "[multiprocess][cli][slow]") {
  TempDir dir("mp-bits");
  json m = diloco_manifest();
  m["compute"] = {{"step_time", "50ms"}};  // train.csv's simulated times are then deterministic too
  std::map<std::string, fs::path> folders;
  for (const std::string tag : {"a", "b"}) {
    m["output"]["dir"] = "out-" + tag;
    const auto file = write_manifest(dir, tag, m);
    const Outcome o =
        run_cli({"--nproc", "2", "--partial-reduce", "--quiet", file.string()}, dir / ("log-" + tag + ".txt"));
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[tag] = run_folder(dir, "out-" + tag);
  }
  REQUIRE(
      exogym::test::bit_identical(load_model_pt(folders["a"] / "model.pt"), load_model_pt(folders["b"] / "model.pt")));
  REQUIRE(read_text(folders["a"] / "train.csv") == read_text(folders["b"] / "train.csv"));
  REQUIRE(read_text(folders["a"] / "validation.csv") == read_text(folders["b"] / "validation.csv"));
}

TEST_CASE("exogym-run over two processes started by hand with RANK and WORLD_SIZE, or flags", "[multiprocess][cli]") {
  TempDir dir("mp-env");
  json m = small_manifest(2);
  const auto file = write_manifest(dir, "m", m);
  const int port = exogym::runtime::dist::pick_free_port();
  const auto started = Clock::now();
  // Process 1 by environment, process 0 by flags.
  const pid_t p1 =
      spawn({"--quiet", "--timeout", "20", file.string()},
            {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}},
            dir / "log1.txt");
  const pid_t p0 = spawn({"--quiet", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1", "--master-port",
                          std::to_string(port), "--timeout", "20", file.string()},
                         {}, dir / "log0.txt");
  const Outcome o0 = wait_for(p0, dir / "log0.txt", started, 120);
  const Outcome o1 = wait_for(p1, dir / "log1.txt", started, 120);
  INFO(o0.output << "\n---\n" << o1.output);
  REQUIRE(o0.code == 0);
  REQUIRE(o1.code == 0);
  REQUIRE(fs::exists(run_folder(dir, "out") / "model.pt"));
  REQUIRE_THAT(o0.output, Catch::Contains("outputs:"));
  REQUIRE(o1.output.find("outputs:") == std::string::npos);  // process 1 prints nothing on success
}

TEST_CASE("each process loads the data once, for its own block of nodes, and uneven blocks work",
          "[multiprocess][cli]") {
  TempDir dir("mp-data");
  json m = small_manifest(5);  // 5 nodes over 2 processes: blocks of 2 and 3
  m["model"]["options"]["input_size"] = 1;
  const std::string log = (dir / "requests.txt").string();
  m["data"]["train"] = {{"dataset", "counting"}, {"options", {{"size", 4000}, {"classes", 4}, {"log", log}}}};
  m["data"]["val"] = {{"dataset", "counting"}, {"split", "test"}, {"options", {{"size", 400}, {"classes", 4}}}};
  m["compute"] = {{"step_time", "10ms"}};
  const auto file = write_manifest(dir, "m", m);
  const std::vector<std::string> plugins = {"--plugin-path", EXOGYM_TEST_PLUGIN_DIR};
  std::vector<std::string> args = plugins;
  args.insert(args.end(), {"--quiet", "--nproc", "2", "--timeout", "20", file.string()});
  const Outcome o = run_cli(args, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code == 0);
  std::vector<std::string> lines = exogym::test::read_lines(log);
  std::sort(lines.begin(), lines.end());
  REQUIRE(lines.size() == 2);  // once per process (the launcher checks the manifest without loading data)
  std::istringstream first(lines[0]), second(lines[1]);
  std::string split0, split1;
  int f0, n0, k0, f1, n1, k1;
  long pid0, pid1;
  first >> split0 >> f0 >> n0 >> k0 >> pid0;
  second >> split1 >> f1 >> n1 >> k1 >> pid1;
  REQUIRE(split0 == "train");
  REQUIRE(split1 == "train");
  REQUIRE(f0 == 0);
  REQUIRE(n0 == 2);
  REQUIRE(f1 == 2);
  REQUIRE(n1 == 3);
  REQUIRE(k0 == 5);
  REQUIRE(k1 == 5);
  REQUIRE(pid0 != pid1);
  // Uneven blocks give the single-process result too.
  m["data"]["train"]["options"].erase("log");
  m["output"]["dir"] = "single";
  const auto single_file = write_manifest(dir, "single", m);
  std::vector<std::string> single_args = plugins;
  single_args.insert(single_args.end(), {"--quiet", single_file.string()});
  REQUIRE(run_cli(single_args, dir / "log1.txt", 60).code == 0);
  REQUIRE(exogym::test::bit_identical(load_model_pt(run_folder(dir, "out") / "model.pt"),
                                      load_model_pt(run_folder(dir, "single") / "model.pt")));
}

TEST_CASE("metrics recorded by nodes of other processes reach metrics.csv", "[multiprocess][cli]") {
  TempDir dir("mp-metrics");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 3;
  m["strategy"] = {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
                   {"options", {{"fail_node", -1}, {"record", true}}}};
  const auto file = write_manifest(dir, "m", m);
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "20", file.string()}, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code == 0);
  std::set<std::pair<int, int>> seen;
  for (const auto& row : read_csv(run_folder(dir, "out") / "metrics.csv")) {
    REQUIRE(row.at("name") == "probe");
    const int node = std::stoi(row.at("node")), step = std::stoi(row.at("step"));
    REQUIRE(std::stod(row.at("value")) == 1000.0 * node + step);
    seen.insert({node, step});
  }
  REQUIRE(seen.size() == 12);  // 4 nodes x 3 steps, from both processes
}

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
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "3", file.string()}, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code != 0);
  REQUIRE(o.seconds < 30);
  REQUIRE_THAT(o.output, Catch::Contains("process 1 (nodes 2-3") && Catch::Contains("no sign of life for 3 s"));
  // The launcher ended the stopped process itself.
  REQUIRE_THAT(o.output, Catch::Contains("terminating"));
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
