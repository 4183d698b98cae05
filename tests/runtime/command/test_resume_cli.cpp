// exogym-run --resume: runs stopped by SIGKILL, Ctrl-C or a full disk, a
// damaged newest checkpoint, several processes, and every bad input
// (docs/checkpoints.md).
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "exogym/runtime/checkpoint/checkpoint_index.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Long enough (a few seconds) that a signal reaches it mid-run.
json long_manifest() {
  json m = checkpointed_manifest(4, 100);
  m["model"]["options"]["hidden"] = {128};
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 7}, {"optimizer", {{"name", "adamw"}, {"lr", 0.003}}}}}};
  m["train"]["max_steps"] = 3000;
  m["eval"]["interval"] = 250;
  return m;
}

// Starts exogym-run on `manifest`, sends `signal` once `marker` exists, and
// waits for it to end.
Outcome signal_after(const fs::path& manifest, const fs::path& marker, int signal, const fs::path& log) {
  const auto started = Clock::now();
  const pid_t pid = spawn({manifest.string(), "--progress=none"}, {}, log);
  while (!fs::exists(marker)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) FAIL("the run ended before " << marker << ":\n" << read_text(log));
    if (Clock::now() - started > std::chrono::seconds(120)) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, signal);
  return wait_for(pid, log, started, 120);
}

// Flips one byte of `file` near its end (tensor data).
void damage(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-5, std::ios::end);
  const char c = static_cast<char>(f.get() ^ 0x5a);
  f.seekp(-5, std::ios::end);
  f.put(c);
}

// exogym-run --resume `run` must succeed and end as `whole`.
void require_resumes_to(const fs::path& run, const fs::path& whole, const fs::path& log) {
  const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, log);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  require_same_run(whole, run);
}

// comparison.csv without its wall-clock columns (wall_s, and wall_s_std
// over seeds), row by row.
std::vector<std::vector<std::string>> comparison_without_wall(const fs::path& folder) {
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> wall;
  for (const auto& line : read_lines(folder / "comparison.csv")) {
    std::vector<std::string> cells, kept;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
    if (wall.empty()) {
      for (const auto& name : cells) wall.push_back(name.rfind("wall_s", 0) == 0);
    }
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i >= wall.size() || !wall[i]) kept.push_back(cells[i]);
    }
    rows.push_back(kept);
  }
  return rows;
}

}  // namespace

TEST_CASE("a run killed with SIGKILL after a checkpoint resumes to the run that never stopped", "[checkpoint][slow]") {
  TempDir dir("resume-kill");
  json m = long_manifest();
  m["output"]["dir"] = "whole";
  REQUIRE(run_cli({write_manifest(dir, "whole", m).string(), "--progress=none"}, dir / "whole.log").code == 0);
  m["output"]["dir"] = "killed";
  const fs::path run = run_folder(dir, "killed");
  const Outcome killed = signal_after(write_manifest(dir, "killed", m), run / "checkpoints" / "step-200" / "index.json",
                                      SIGKILL, dir / "killed.log");
  REQUIRE(killed.code == 128 + SIGKILL);
  require_resumes_to(run, run_folder(dir, "whole"), dir / "resumed.log");
}

TEST_CASE("Ctrl-C writes a checkpoint where the run stopped, exits 130, and the run resumes exactly",
          "[checkpoint][slow]") {
  TempDir dir("resume-ctrl-c");
  json m = long_manifest();
  m["checkpoint"]["interval"] = 500;
  m["output"]["dir"] = "whole";
  REQUIRE(run_cli({write_manifest(dir, "whole", m).string(), "--progress=none"}, dir / "whole.log").code == 0);
  m["output"]["dir"] = "stopped";
  const fs::path run = run_folder(dir, "stopped");
  const Outcome stopped = signal_after(write_manifest(dir, "stopped", m),
                                       run / "checkpoints" / "step-500" / "index.json", SIGINT, dir / "stopped.log");
  INFO(stopped.output);
  REQUIRE(stopped.code == 130);
  CHECK(stopped.output.find("--resume " + run.string()) != std::string::npos);
  // The stop's checkpoint is the newest, past the one of step 500.
  const int64_t step = runtime::checkpoint::list_checkpoints(run).rbegin()->first;
  CHECK(step > 500);
  CHECK(step < 3000);
  CHECK(read_lines(run / "train.csv").size() == static_cast<size_t>(step + 1));
  require_resumes_to(run, run_folder(dir, "whole"), dir / "resumed.log");
}

TEST_CASE("a run with a plugin from --plugin-path resumes by the command its Ctrl-C printed, bit for bit",
          "[checkpoint][slow]") {
  TempDir dir("resume-plugin-path");
  // quantized_sgd is a test plugin: found through --plugin-path only.
  json m = long_manifest();
  m["strategy"] = {{"plugin", "quantized_sgd"}, {"options", {{"quantize", "fp4"}}}};
  m["checkpoint"]["interval"] = 500;
  const std::string plugin_path = "--plugin-path=" EXOGYM_TEST_PLUGIN_DIR;
  const std::map<std::string, std::string> no_env = {{"EXOGYM_PLUGIN_PATH", ""}};
  m["output"]["dir"] = "whole";
  REQUIRE(run_cli({write_manifest(dir, "whole", m).string(), plugin_path, "--progress=none"}, dir / "whole.log", 240,
                  no_env)
              .code == 0);
  m["output"]["dir"] = "stopped";
  const fs::path run = run_folder(dir, "stopped");
  const fs::path marker = run / "checkpoints" / "step-500" / "index.json";
  const auto started = Clock::now();
  const pid_t pid =
      spawn({write_manifest(dir, "stopped", m).string(), plugin_path, "--progress=none"}, no_env, dir / "stopped.log");
  while (!fs::exists(marker) && Clock::now() - started < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGINT);
  const Outcome stopped = wait_for(pid, dir / "stopped.log", started, 120);
  INFO(stopped.output);
  REQUIRE(stopped.code == 130);
  // The printed command, as is: no --plugin-path.
  const std::string printed = "exogym-run --resume " + run.string();
  REQUIRE(stopped.output.find(printed) != std::string::npos);
  const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, dir / "resumed.log", 240, no_env);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  require_same_run(run_folder(dir, "whole"), run);
  // A plugin file that is gone is named, with how to point at it.
  json config = json::parse(read_text(run / "config.json"));
  config["runtime"]["plugin_files"]["strategy"] = (dir / "moved" / "exogym_strategy_quantized_sgd.so").string();
  std::ofstream(run / "config.json") << config.dump(2);
  const Outcome missing = run_cli({"--resume", run.string(), "--set", "train.max_steps=3100", "--progress=none"},
                                  dir / "missing.log", 120, no_env);
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("--resume: the run loaded its strategy plugin \"quantized_sgd\" from " +
                                             (dir / "moved").string() +
                                             "/exogym_strategy_quantized_sgd.so, which is "
                                             "gone; build it there again, or give the folder it is in now with "
                                             "--plugin-path"));
}

TEST_CASE("SIGTERM delivered twice at once (as timeout does) is one request: a checkpoint, exit 130",
          "[checkpoint][slow]") {
  TempDir dir("resume-double-term");
  json m = long_manifest();
  m["checkpoint"]["interval"] = 500;
  const fs::path run = run_folder(dir, "out");
  const auto started = Clock::now();
  const pid_t pid = spawn({write_manifest(dir, "twice", m).string(), "--progress=none"}, {}, dir / "twice.log");
  const fs::path marker = run / "checkpoints" / "step-500" / "index.json";
  while (!fs::exists(marker) && Clock::now() - started < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // The process, then its group: the same stop, twice within microseconds.
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGTERM);
  const Outcome stopped = wait_for(pid, dir / "twice.log", started, 120);
  INFO(stopped.output);
  REQUIRE(stopped.code == 130);
  CHECK(stopped.output.find("--resume " + run.string()) != std::string::npos);
  CHECK(stopped.output.find("interrupted by a signal (SIGTERM)") != std::string::npos);
  const int64_t step = runtime::checkpoint::list_checkpoints(run).rbegin()->first;
  CHECK(step > 500);
  CHECK(step < 3000);
}

TEST_CASE("Ctrl-C over --nproc 2: the processes agree on a step, save it there, exit 130, and the run resumes exactly",
          "[checkpoint][slow]") {
  TempDir dir("resume-nproc-ctrl-c");
  json m = long_manifest();
  m["checkpoint"]["interval"] = 500;
  m["output"]["dir"] = "whole";
  REQUIRE(run_cli({write_manifest(dir, "whole", m).string(), "--progress=none"}, dir / "whole.log").code == 0);
  // The signal goes to the launcher, which passes it to both processes (as
  // Ctrl-C in a terminal reaches both), or to one process alone (a SIGTERM
  // to one host's process), which tells the other through the store.
  for (const bool one_process : {false, true}) {
    const std::string out = one_process ? "one" : "both";
    m["output"]["dir"] = out;
    const fs::path run = run_folder(dir, out);
    const fs::path log = dir / (out + ".log");
    const auto started = Clock::now();
    const pid_t launcher =
        spawn({write_manifest(dir, out, m).string(), "--nproc", "2", "--timeout", "60", "--progress=none"}, {}, log);
    const fs::path marker = run / "checkpoints" / "step-500" / "index.json";
    while (!fs::exists(marker)) {
      int status = 0;
      if (::waitpid(launcher, &status, WNOHANG) == launcher)
        FAIL("the run ended before " << marker << ":\n" << read_text(log));
      if (Clock::now() - started > std::chrono::seconds(120)) ::kill(launcher, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    pid_t target = launcher;
    if (one_process) {
      std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
      REQUIRE(children >> target);
    }
    ::kill(target, SIGINT);
    const Outcome stopped = wait_for(launcher, log, started, 120);
    INFO(out << ":\n" << stopped.output);
    REQUIRE(stopped.code == 130);
    CHECK(stopped.output.find("--resume " + run.string()) != std::string::npos);
    // One checkpoint of the agreed step, past the periodic one, holding every node.
    const int64_t step = runtime::checkpoint::list_checkpoints(run).rbegin()->first;
    CHECK(step > 500);
    CHECK(step < 3000);
    const json index = json::parse(read_text(run / "checkpoints" / ("step-" + std::to_string(step)) / "index.json"));
    CHECK(index.at("nodes") == 4);
    CHECK(index.at("processes") == 2);
    CHECK(read_lines(run / "train.csv").size() == static_cast<size_t>(step + 1));
    const Outcome resumed =
        run_cli({"--resume", run.string(), "--nproc", "2", "--progress=none"}, dir / (out + "-resumed.log"));
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    require_same_run(run_folder(dir, "whole"), run);
  }
}

TEST_CASE("a damaged or truncated newest checkpoint is skipped with a warning and the previous one used",
          "[checkpoint]") {
  TempDir dir("resume-damaged");
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 20;
  m["checkpoint"]["keep"] = 3;
  train_into(m, dir / "whole");
  for (const bool truncate : {false, true}) {
    INFO((truncate ? "truncated" : "damaged"));
    const fs::path run = dir / (truncate ? "truncated" : "damaged");
    train_into(m, run);
    const fs::path newest = run / "checkpoints" / "step-20" / "node-1.safetensors";
    if (truncate)
      fs::resize_file(newest, fs::file_size(newest) / 2);
    else
      damage(newest);
    const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, dir / "resumed.log");
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    CHECK(resumed.output.find("skipping checkpoint " + (run / "checkpoints" / "step-20").string()) !=
          std::string::npos);
    CHECK(resumed.output.find(newest.string()) != std::string::npos);
    require_same_run(dir / "whole", run);
  }
}

TEST_CASE("a full disk while saving stops with an error naming the file and the previous checkpoint loads",
          "[checkpoint]") {
  TempDir dir("resume-full-disk");
  json m = checkpointed_manifest(2, 10);
  m["model"]["options"]["hidden"] = {512};  // node files of ~80 kB
  m["train"]["max_steps"] = 40;
  m["output"]["dir"] = "whole";
  train_into(m, dir / "whole");
  m["train"]["max_steps"] = 20;
  const fs::path run = dir / "run";
  train_into(m, run);
  // Files may not grow beyond 50 kB: the CSVs still can, a node file cannot.
  const fs::path log = dir / "full.log";
  const std::string command = "ulimit -f 50; trap '' XFSZ; exec " + exogym_run().string() + " --resume " +
                              run.string() + " --set train.max_steps=40 --progress=none > " + log.string() + " 2>&1";
  const int status = std::system(("bash -c \"" + command + "\"").c_str());
  const std::string output = read_text(log);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(output.find("node-") != std::string::npos);
  CHECK(output.find(".safetensors") != std::string::npos);
  CHECK(!fs::exists(run / "checkpoints" / "step-30"));
  for (const auto& entry : fs::directory_iterator(run / "checkpoints"))
    CHECK(entry.path().filename().string().rfind("step-", 0) == 0);  // no partial folder left
  resume_in(run, {"train.max_steps=40"});
  require_same_run(dir / "whole", run);
}

TEST_CASE(
    "a folder of variants killed mid-way resumes as a whole: finished variants kept, the stopped one "
    "continued, the rest started",
    "[checkpoint][slow]") {
  TempDir dir("resume-variants");
  json m = long_manifest();
  m["runs"] = json::array({{{"name", "a"}, {"train", {{"max_steps", 300}}}},
                           {{"name", "b"}},
                           {{"name", "c"}, {"train", {{"max_steps", 300}}}}});
  m["output"]["dir"] = "whole";
  const Outcome whole_run = run_cli({write_manifest(dir, "whole", m).string(), "--progress=none"}, dir / "whole.log");
  INFO(whole_run.output);
  REQUIRE(whole_run.code == 0);
  m["output"]["dir"] = "killed";
  const fs::path folder = run_folder(dir, "killed");
  const Outcome killed =
      signal_after(write_manifest(dir, "killed", m), folder / "b" / "checkpoints" / "step-200" / "index.json", SIGKILL,
                   dir / "killed.log");
  REQUIRE(killed.code == 128 + SIGKILL);
  REQUIRE(fs::exists(folder / "a" / "summary.json"));
  REQUIRE_FALSE(fs::exists(folder / "c"));
  const auto a_written = fs::last_write_time(folder / "a" / "train.csv");

  const Outcome resumed = run_cli({"--resume", folder.string(), "--progress=none"}, dir / "resumed.log");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  const fs::path whole = run_folder(dir, "whole");
  for (const char* variant : {"a", "b", "c"}) require_same_run(whole / variant, folder / variant);
  CHECK(fs::last_write_time(folder / "a" / "train.csv") == a_written);  // read back, not trained again
  CHECK(comparison_without_wall(folder) == comparison_without_wall(whole));
  CHECK(fs::exists(folder / "report.html"));
  // Resuming the finished comparison trains nothing and prints the same table.
  const Outcome again = run_cli({"--resume", folder.string(), "--progress=none"}, dir / "again.log");
  CHECK(again.code == 0);
  CHECK(comparison_without_wall(folder) == comparison_without_wall(whole));
  const Outcome from_step = run_cli({"--resume", folder.string(), "--from-step", "200"}, dir / "bad.log");
  CHECK(from_step.code == 2);
  CHECK(from_step.output.find("--from-step: applies to one run") != std::string::npos);
}

TEST_CASE("a seeded comparison resumes as a whole: a finished seed is read back, a missing one trained",
          "[checkpoint]") {
  TempDir dir("resume-seeds");
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 10;
  m.erase("seed");
  m["seeds"] = {1, 2};
  m["output"]["dir"] = "whole";
  const Outcome whole_run = run_cli({write_manifest(dir, "whole", m).string(), "--progress=none"}, dir / "whole.log");
  INFO(whole_run.output);
  REQUIRE(whole_run.code == 0);
  const fs::path whole = run_folder(dir, "whole"), parts = dir / "parts";
  // As if the run had stopped after seed 1: seed 2 and the comparison's files never written.
  fs::copy(whole, parts, fs::copy_options::recursive);
  fs::remove_all(parts / "seed-2");
  for (const char* file : {"comparison.csv", "comparison.txt", "report.html"}) fs::remove(parts / file);
  const auto seed1_written = fs::last_write_time(parts / "seed-1" / "train.csv");

  const Outcome resumed = run_cli({"--resume", parts.string(), "--progress=none"}, dir / "resumed.log");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  require_same_run(whole / "seed-2", parts / "seed-2");
  CHECK(fs::last_write_time(parts / "seed-1" / "train.csv") == seed1_written);
  CHECK(comparison_without_wall(parts) == comparison_without_wall(whole));
  CHECK(read_lines(parts / "comparison.csv").front().find("_std") != std::string::npos);
}

TEST_CASE("bad resume input is a clear error with exit status 2 that changes nothing", "[checkpoint]") {
  TempDir dir("resume-bad");
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 10;
  const fs::path run = dir / "run";
  train_into(m, run);
  const std::string train_csv = read_text(run / "train.csv");
  auto resume = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--resume", run.string()});
    return run_cli(args, dir / "bad.log");
  };
  auto expect = [&](const Outcome& outcome, const std::string& words) {
    INFO(outcome.output);
    CHECK(outcome.code == 2);
    CHECK(outcome.output.find(words) != std::string::npos);
    CHECK(read_text(run / "train.csv") == train_csv);
  };
  fs::create_directories(dir / "empty");
  expect(run_cli({"--resume", (dir / "empty").string()}, dir / "bad.log"), "not a run folder");
  expect(resume({"--set", "strategy.options.optimizer.lr=0.5"}), "strategy.options.optimizer.lr: was 0.1");
  expect(resume({"--set", "nodes=3"}), "nodes: was 2");
  expect(resume({}), "the run already finished its 10 steps");
  expect(resume({"--from-step", "3"}), "--from-step: no checkpoint at step 3; there are: 5, 10");
  expect(run_cli({"m.json", "--resume", run.string()}, dir / "bad.log"), "--resume: takes the run folder");

  // A checkpoint written by other plugins or another ABI (sealed: not damage).
  const fs::path index_file = run / "checkpoints" / "step-10" / "index.json";
  const json index = json::parse(read_text(index_file));
  json other = index;
  other["plugins"][1]["version"] = "9.9.9";
  std::ofstream(index_file) << runtime::checkpoint::seal_index(other).dump();
  expect(resume({"--set", "train.max_steps=12"}), "written with strategy plugin \"allreduce\" 9.9.9");
  other = index;
  other["abi"] = 1;
  std::ofstream(index_file) << runtime::checkpoint::seal_index(other).dump();
  expect(resume({"--set", "train.max_steps=12"}), "written by a runtime with plugin ABI 1");

  // A run without checkpoints.
  m["checkpoint"]["interval"] = 0;
  train_into(m, dir / "plain");
  expect(run_cli({"--resume", (dir / "plain").string()}, dir / "bad.log"), "no checkpoint to resume from");
}

TEST_CASE("a run saved over --nproc 2 resumes over 2 processes and in one", "[checkpoint][slow]") {
  TempDir dir("resume-nproc");
  json m = checkpointed_manifest(4, 5);
  // DiLoCo records metrics on every node: process 1's rows reach metrics.csv
  // through each checkpoint.
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.003}}}}}};
  m["train"]["max_steps"] = 20;
  train_into(m, dir / "whole");
  m["train"]["max_steps"] = 10;
  for (const int processes : {2, 1}) {
    const std::string out = "p" + std::to_string(processes);
    m["output"]["dir"] = out;
    const Outcome saved =
        run_cli({write_manifest(dir, out, m).string(), "--nproc", "2", "--progress=none"}, dir / (out + ".log"));
    INFO(saved.output);
    REQUIRE(saved.code == 0);
    const fs::path run = run_folder(dir, out);
    CHECK(json::parse(read_text(run / "checkpoints" / "step-10" / "index.json")).at("processes") == 2);
    std::vector<std::string> args = {"--resume", run.string(), "--set", "train.max_steps=20", "--progress=none"};
    if (processes > 1) args.insert(args.end(), {"--nproc", std::to_string(processes)});
    const Outcome resumed = run_cli(args, dir / (out + "-resumed.log"));
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    require_same_run(dir / "whole", run);
  }
}

}  // namespace exogym::test
