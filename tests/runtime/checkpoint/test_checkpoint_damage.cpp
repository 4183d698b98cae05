// Checkpoints that lie: an edited safetensors header or metadata, an edited
// index.json (the CSVs' lengths, the last evaluation), a tensor of the
// wrong shape, a step folder without an index, a checkpoint too many. Each
// is skipped for the one before it with a warning naming the file, or stops
// with exit 2 naming the file and the field; nothing in the run folder
// changes before the checkpoint to resume from is checked
// (docs/checkpoints.md).
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "exogym/runtime/checkpoint/checkpoint_index.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/output/folder_lock.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json damage_manifest() {
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 20;
  m["checkpoint"]["keep"] = 3;
  return m;
}

// Rewrites the JSON header of a safetensors file with `edit`, keeping the
// data as it is (the header's length is written again, padded to 8 bytes).
void edit_header(const fs::path& file, const std::function<void(json&)>& edit) {
  const std::string bytes = read_text(file);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, length));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t new_length = text.size();
  std::string out(reinterpret_cast<const char*>(&new_length), 8);
  write_bytes(file, out + text + bytes.substr(8 + length));
}

// Edits a checkpoint's index.json; `seal`: with a digest made again, as a
// writer that meant it would.
void edit_index(const fs::path& checkpoint, const std::function<void(json&)>& edit, bool seal) {
  const fs::path file = checkpoint / "index.json";
  json index = json::parse(read_text(file));
  edit(index);
  write_bytes(file, (seal ? runtime::checkpoint::seal_index(index) : index).dump(2));
}

// Resumes `run` (exit 0 expected), which must then be `whole`, having
// skipped step-20 with a warning that holds `words`.
void require_checkpoint_falls_back(const fs::path& run, const fs::path& whole, const std::string& words,
                                   const fs::path& log) {
  const Outcome resumed = run_cli({"--resume", run.string(), "--progress=none"}, log);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(resumed.output.find("skipping checkpoint " + (run / "checkpoints" / "step-20").string()) != std::string::npos);
  CHECK(resumed.output.find(words) != std::string::npos);
  CHECK(resumed.output.find("json.exception") == std::string::npos);
  require_same_run(whole, run);
}

}  // namespace

TEST_CASE("an edited header or metadata of a node file is damage: the previous checkpoint is used", "[checkpoint]") {
  TempDir dir("damage-header");
  const json m = damage_manifest();
  train_into(m, dir / "whole");
  const std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"dtype", [](json& h) { h["model.layers.1.weight"]["dtype"] = "I32"; }},
      {"shape",
       [](json& h) {
         h["model.layers.1.weight"]["shape"] = {32, 4};
       }},
      {"generator dtype", [](json& h) { h["rng.model"]["dtype"] = "I8"; }},
      {"meter", [](json& h) { h["__metadata__"]["meter"] = R"({"garbage":1})"; }},
      {"extra metadata", [](json& h) { h["__metadata__"]["note"] = "x"; }},
  };
  for (const auto& [what, edit] : edits) {
    INFO(what);
    const fs::path run = dir / "run";
    fs::remove_all(run);
    train_into(m, run);
    const fs::path node = run / "checkpoints" / "step-20" / "node-0.safetensors";
    edit_header(node, edit);
    require_checkpoint_falls_back(run, dir / "whole", node.string() + ": damaged", dir / "resumed.log");
  }
}

TEST_CASE("an edited index.json is damage, and sealed again its lengths and fields are still checked", "[checkpoint]") {
  TempDir dir("damage-index");
  const json m = damage_manifest();
  train_into(m, dir / "whole");
  const fs::path whole_train = dir / "whole" / "train.csv";
  const auto mid_row = static_cast<int64_t>(read_text(whole_train).find('\n', 100)) - 3;
  struct Edit {
    std::string what;
    bool seal;
    std::function<void(json&)> edit;
    std::string words;
  };
  const std::vector<Edit> edits = {
      {"csv_bytes", false, [](json& i) { i["sections"]["outputs"]["csv_bytes"]["train.csv"] = "abc"; }, "damaged"},
      {"last_eval", false, [](json& i) { i["sections"]["outputs"]["last_eval"] = "x"; }, "damaged"},
      {"sealed csv_bytes", true, [](json& i) { i["sections"]["outputs"]["csv_bytes"]["train.csv"] = "abc"; },
       "sections.outputs.csv_bytes.train.csv: expected a length in bytes, got \"abc\""},
      {"sealed mid-row", true, [&](json& i) { i["sections"]["outputs"]["csv_bytes"]["train.csv"] = mid_row; },
       "is not the end of a row"},
      {"sealed last_eval", true, [](json& i) { i["sections"]["outputs"]["last_eval"] = "x"; }, "sections.outputs: "},
  };
  for (const auto& e : edits) {
    INFO(e.what);
    const fs::path run = dir / "run";
    fs::remove_all(run);
    train_into(m, run);
    edit_index(run / "checkpoints" / "step-20", e.edit, e.seal);
    require_checkpoint_falls_back(run, dir / "whole", e.words, dir / "resumed.log");
  }
}

TEST_CASE("a sealed but unreadable failures section is skipped for the checkpoint before it", "[checkpoint]") {
  TempDir dir("damage-faults");
  json m = damage_manifest();
  m["faults"] = json::parse(R"([{"node": 1, "fail_at": 3, "rejoin_at": 7}])");
  train_into(m, dir / "whole");
  const fs::path run = dir / "run";
  train_into(m, run);
  edit_index(
      run / "checkpoints" / "step-20", [](json& i) { i["sections"]["faults"]["epoch"] = "x"; }, true);
  require_checkpoint_falls_back(run, dir / "whole", "index.json: sections.faults: type must be number",
                                dir / "resumed.log");
}

TEST_CASE("a node file of another model is skipped, and when none fits nothing in the run folder changes",
          "[checkpoint]") {
  TempDir dir("damage-shape");
  json m = damage_manifest();
  train_into(m, dir / "whole");
  json other = m;
  other["model"]["options"]["hidden"] = {16};
  train_into(other, dir / "other");
  const fs::path run = dir / "run";
  train_into(m, run);
  // A valid file of the right node and step, of a model with other shapes.
  const fs::path node = run / "checkpoints" / "step-20" / "node-1.safetensors";
  fs::copy_file(dir / "other" / "checkpoints" / "step-20" / "node-1.safetensors", node,
                fs::copy_options::overwrite_existing);
  require_checkpoint_falls_back(run, dir / "whole", node.string() + ": \"model.layers.0.weight\" has shape [16, 32]",
                                dir / "resumed.log");

  // Every checkpoint of another model: exit 2 naming the files, the folder
  // as it was.
  const fs::path all = dir / "all";
  train_into(m, all);
  for (const auto& [step, folder] : runtime::checkpoint::list_checkpoints(all)) {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string name = "node-" + std::to_string(rank) + ".safetensors";
      fs::copy_file(dir / "other" / "checkpoints" / folder.filename() / name, folder / name,
                    fs::copy_options::overwrite_existing);
    }
  }
  std::map<std::string, std::string> before;
  for (const char* file : {"config.json", "summary.json", "train.csv", "validation.csv", "comm.csv", "metrics.csv"})
    before[file] = read_text(all / file);
  const Outcome o = run_cli({"--resume", all.string(), "--set", "train.max_steps=30"}, dir / "all.log");
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find("no checkpoint loads") != std::string::npos);
  CHECK(o.output.find((all / "checkpoints" / "step-10" / "node-0.safetensors").string() +
                      ": \"model.layers.0.weight\" has shape [16, 32], the model's is [32, 32]") != std::string::npos);
  for (const auto& [file, text] : before) CHECK(read_text(all / file) == text);
}

TEST_CASE("a FIFO or a device in a checkpoint is skipped with a warning, without blocking", "[checkpoint]") {
  TempDir dir("damage-fifo");
  const json m = damage_manifest();
  train_into(m, dir / "whole");
  for (const std::string name : {"node-1.safetensors", "index.json"}) {
    INFO(name);
    const fs::path run = dir / "run";
    fs::remove_all(run);
    train_into(m, run);
    const fs::path file = run / "checkpoints" / "step-20" / name;
    fs::remove(file);
    if (name == "index.json")
      fs::create_symlink("/dev/zero", file);
    else
      REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
    require_checkpoint_falls_back(
        run, dir / "whole", file.string() + (name == "index.json" ? ": a device" : ": a FIFO"), dir / "resumed.log");
  }
}

TEST_CASE("a step folder without an index is named in a warning, and a resume prunes beyond keep", "[checkpoint]") {
  TempDir dir("damage-leftovers");
  json m = damage_manifest();
  m["checkpoint"]["keep"] = 2;
  const fs::path run = dir / "run";
  train_into(m, run);
  const fs::path checkpoints = run / "checkpoints";
  // Killed between the commit of step 20 and its pruning, before the end:
  // one checkpoint too many (a copy of step 15 stands for it) and no summary.
  fs::copy(checkpoints / "step-15", checkpoints / "step-10");
  fs::remove(run / "summary.json");
  fs::create_directories(checkpoints / "step-25");
  const Outcome o = run_cli({"--resume", run.string(), "--set", "train.max_steps=20"}, dir / "resumed.log");
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(o.output.find("skipping checkpoint " + (checkpoints / "step-25").string() + ": it has no index.json") !=
        std::string::npos);
  std::vector<int64_t> steps;
  for (const auto& [step, folder] : runtime::checkpoint::list_checkpoints(run)) steps.push_back(step);
  CHECK(steps == std::vector<int64_t>{15, 20});
}

TEST_CASE("one exogym-run at a time per run folder: a resume of a folder in use stops with exit 2, changing nothing",
          "[checkpoint]") {
  TempDir dir("resume-locked");
  json m = damage_manifest();
  m["train"]["max_steps"] = 10;
  const fs::path run = dir / "run";
  train_into(m, run);
  const std::string config = read_text(run / "config.json"), train_csv = read_text(run / "train.csv");
  {
    // This process stands for a resume in progress.
    runtime::output::FolderLock held(run);
    const Outcome o = run_cli({"--resume", run.string(), "--set", "train.max_steps=20"}, dir / "locked.log");
    INFO(o.output);
    CHECK(o.code == 2);
    CHECK(o.output.find(run.string() + ": in use by another exogym-run") != std::string::npos);
    CHECK(read_text(run / "config.json") == config);
    CHECK(read_text(run / "train.csv") == train_csv);
    CHECK(fs::exists(run / "summary.json"));
    CHECK_THROWS_AS(runtime::output::FolderLock(run), sdk::DataError);
  }
  // Released (as by a process that ended, however it ended): it resumes.
  const Outcome o = run_cli({"--resume", run.string(), "--set", "train.max_steps=20"}, dir / "free.log");
  INFO(o.output);
  CHECK(o.code == 0);
  CHECK(read_lines(run / "train.csv").size() == 21);
}

}  // namespace exogym::test
