// The clients' part of a checkpoint (clients.safetensors) and an
// asynchronous node's state, damaged or edited (issue #53): a file that is
// damaged, truncated, missing or a FIFO is skipped for the checkpoint
// before, as a damaged node file is; an edit sealed with a recomputed
// digest (a client outside the run, one client's tensor of another dtype or
// shape, a tensor missing, a negative count of asynchronous steps) is
// checked before anything in the run folder changes, and skipped too; when
// no checkpoint is left, exit 2 with the folder as it was.
#include <ATen/ATen.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <map>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/runtime/checkpoint/state_digest.h"
#include "exogym/runtime/output/safetensors.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;
using runtime::checkpoint::ClientStates;

namespace {

// SCAFFOLD (control variates per client) on 3 nodes drawing 3 of 8 clients
// in rounds of 2 steps, a checkpoint after each round, the last 3 kept.
json clients_manifest() {
  json m = checkpointed_manifest(3, 2);
  m["checkpoint"]["keep"] = 3;
  m["strategy"] = {{"plugin", "scaffold"}, {"options", {{"H", 2}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}}};
  m["participation"] = {{"clients", 8}, {"per_round", 3}};
  m["train"]["max_steps"] = 8;
  return m;
}

fs::path last_checkpoint(const fs::path& run) { return run / "checkpoints" / "step-8"; }

// Resumes `run` (exit 0 expected), which must then be `whole`, having
// skipped step-8 with a warning that holds `words`.
void require_client_state_falls_back(const fs::path& run, const fs::path& whole, const std::string& words,
                                     const fs::path& log) {
  const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, log);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(resumed.output.find("skipping checkpoint " + last_checkpoint(run).string()) != std::string::npos);
  CHECK(resumed.output.find(words) != std::string::npos);
  require_same_run(whole, run);
}

// Rewrites the clients' file of the checkpoint in `folder` after `edit`,
// with its digest made again, as a writer that meant it would.
void seal_clients(const fs::path& folder, const std::function<void(ClientStates&)>& edit) {
  ClientStates states = runtime::checkpoint::read_client_states(folder, 8);
  REQUIRE(states.size() >= 2);
  edit(states);
  runtime::checkpoint::write_client_states(folder, 8, states);
}

}  // namespace

TEST_CASE("a damaged, truncated, missing or FIFO clients.safetensors falls back to the checkpoint before",
          "[checkpoint][participation]") {
  TempDir dir("clients-damage");
  const json m = clients_manifest();
  train_into(m, dir / "whole");
  const std::vector<std::pair<std::string, std::function<std::string(const fs::path&)>>> damages = {
      {"truncated",
       [](const fs::path& file) {
         const std::string bytes = read_text(file);
         std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
         return file.string() + ": not a safetensors file";
       }},
      {"damaged",
       [](const fs::path& file) {
         std::string bytes = read_text(file);
         bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x40);
         std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
         return file.string() + ": damaged";
       }},
      {"missing",
       [](const fs::path& file) {
         fs::remove(file);
         return file.string() + ": missing";
       }},
      {"FIFO",
       [](const fs::path& file) {
         fs::remove(file);
         REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
         return file.string() + ": a FIFO, not a regular file";
       }},
  };
  for (const auto& [what, damage] : damages) {
    INFO(what);
    const fs::path run = dir / "run";
    fs::remove_all(run);
    train_into(m, run);
    const std::string words = damage(last_checkpoint(run) / "clients.safetensors");
    require_client_state_falls_back(run, dir / "whole", words, dir / "resumed.log");
  }
}

TEST_CASE("a sealed edit of clients.safetensors is checked before the run folder changes",
          "[checkpoint][participation]") {
  TempDir dir("clients-sealed");
  const json m = clients_manifest();
  train_into(m, dir / "whole");
  const std::string file = "clients.safetensors: ";
  struct Edit {
    std::string what;
    std::function<void(ClientStates&)> edit;
    std::string words;
  };
  const std::vector<Edit> edits = {
      {"client out of range", [](ClientStates& s) { s[11] = s.begin()->second; },
       "client 11 is not in this run's 8 clients (0 to 7)"},
      {"dtype",
       [](ClientStates& s) {
         auto& t = s.rbegin()->second.begin()->second;
         t = t.to(at::kDouble);
       },
       "every client's state has the same dtypes and shapes"},
      {"shape",
       [](ClientStates& s) {
         auto& t = s.rbegin()->second.begin()->second;
         t = at::zeros({2, 2}, t.options());
       },
       "every client's state has the same dtypes and shapes"},
      {"missing tensor", [](ClientStates& s) { s.rbegin()->second.erase(s.rbegin()->second.begin()); },
       "every client's state has the same tensors"},
  };
  for (const auto& e : edits) {
    INFO(e.what);
    const fs::path run = dir / "run";
    fs::remove_all(run);
    train_into(m, run);
    seal_clients(last_checkpoint(run), e.edit);
    require_client_state_falls_back(run, dir / "whole", e.words, dir / "resumed.log");
  }

  // Every checkpoint edited: exit 2 naming the files, nothing changed.
  const fs::path all = dir / "all";
  train_into(m, all);
  for (const auto& [step, folder] : runtime::checkpoint::list_checkpoints(all)) {
    ClientStates states = runtime::checkpoint::read_client_states(folder, step);
    states[9] = states.begin()->second;
    runtime::checkpoint::write_client_states(folder, step, states);
  }
  std::map<std::string, std::string> before;
  for (const char* name : {"config.json", "summary.json", "train.csv", "validation.csv", "comm.csv", "metrics.csv"})
    before[name] = read_text(all / name);
  const Outcome o = run_cli({"--resume", all.string(), "--set", "train.max_steps=12"}, dir / "all.log");
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find("no checkpoint loads") != std::string::npos);
  CHECK(o.output.find((all / "checkpoints" / "step-4").string() + "/" + file +
                      "client 9 is not in this run's 8 clients (0 to 7)") != std::string::npos);
  for (const auto& [name, text] : before) CHECK(read_text(all / name) == text);
  CHECK(runtime::checkpoint::list_checkpoints(all).size() == 3);
}

TEST_CASE("an asynchronous node's state sealed with a negative count of steps is skipped for the checkpoint before",
          "[checkpoint][async]") {
  TempDir dir("async-sealed");
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 20;
  m["checkpoint"]["keep"] = 3;
  const auto [plugin, options] = async_strategies().at(1);
  m["strategy"] = {{"plugin", plugin}, {"options", options}};
  train_into(m, dir / "whole");
  const fs::path run = dir / "run";
  train_into(m, run);
  const fs::path node = run / "checkpoints" / "step-20" / "node-1.safetensors";
  runtime::output::SafetensorsFile read = runtime::output::read_safetensors(node);
  json async = json::parse(read.metadata.at("async"));
  async["steps_computed"] = -5;  // reached an internal "this is a bug" check mid-run
  read.metadata["async"] = async.dump();
  read.metadata[runtime::checkpoint::kDigestKey] = runtime::checkpoint::state_digest(read.tensors, read.metadata);
  runtime::output::write_safetensors(node, read.tensors, read.metadata);
  const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, dir / "resumed.log");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(resumed.output.find("skipping checkpoint " + (run / "checkpoints" / "step-20").string() + ": " + node.string() +
                            ": metadata \"async\": \"steps_computed\" is not a count at or above 0, got -5") !=
        std::string::npos);
  require_same_run(dir / "whole", run);
}

}  // namespace exogym::test
