// Non-IID data in whole runs: label partitions chosen in the manifest,
// data.csv and the label skew of summary.json and the variants' table, and
// the same partition over any parallelism and process count.
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "exogym/runtime/command/comparison.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::load_model_pt;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using json = nlohmann::json;

namespace {

// `nodes` nodes on the counting dataset: 1000 examples, example i of label i % 4.
json counting_manifest(int nodes, const json& partition) {
  json m = small_manifest(nodes);
  m["model"]["options"]["input_size"] = 1;
  m["data"] = {
      {"train", {{"dataset", "counting"}, {"partition", partition}, {"options", {{"size", 1000}, {"classes", 4}}}}}};
  return m;
}

}  // namespace

TEST_CASE("a labels partition shows in data.csv, summary.json and the variants' table", "[partition][training]") {
  TempDir dir("labels-run");
  const json partition = {{"name", "labels"}, {"nodes", {{"0", {0}}, {"1", {1}}, {"2", {2, 3}}}}};
  const auto r = run_json(counting_manifest(3, partition), dir.path());
  const auto rows = read_csv(dir / "run" / "data.csv");
  REQUIRE(rows.size() == 3);
  const std::vector<std::map<std::string, std::string>> expected = {
      {{"node", "0"}, {"examples", "250"}, {"label_0", "250"}, {"label_1", "0"}, {"label_2", "0"}, {"label_3", "0"}},
      {{"node", "1"}, {"examples", "250"}, {"label_0", "0"}, {"label_1", "250"}, {"label_2", "0"}, {"label_3", "0"}},
      {{"node", "2"}, {"examples", "500"}, {"label_0", "0"}, {"label_1", "0"}, {"label_2", "250"}, {"label_3", "250"}}};
  CHECK(rows == expected);
  REQUIRE(r.label_skew);
  CHECK(*r.label_skew == Approx((1 + 1 + 0.5) / 3));
  const json summary = json::parse(read_text(dir / "run" / "summary.json"));
  CHECK(summary["data"]["partition"] == partition);
  CHECK(summary["data"]["label_skew"].get<double>() == Approx(2.5 / 3));
  const std::string table = exogym::runtime::command::comparison_table({r});
  CHECK_THAT(table, Catch::Contains("label_skew") && Catch::Contains("0.833"));
}

TEST_CASE("IID data.csv counts the first epoch's examples, and text has no label columns", "[partition][training]") {
  TempDir dir("iid-run");
  const auto r = run_json(counting_manifest(4, "iid"), dir.path());
  const auto rows = read_csv(dir / "run" / "data.csv");
  REQUIRE(rows.size() == 4);
  for (const auto& row : rows) {
    CHECK(row.at("examples") == "240");  // ⌊1000 / (4 · 16)⌋ steps of 16
    int64_t sum = 0;
    for (int label = 0; label < 4; ++label) sum += std::stoll(row.at("label_" + std::to_string(label)));
    CHECK(sum == 240);
  }
  REQUIRE(r.label_skew);
  CHECK(*r.label_skew < 0.4);
}

TEST_CASE("a label partition of a dataset without labels is an error at the partition", "[partition][training]") {
  TempDir dir("text-labels");
  { std::ofstream(dir / "t.txt") << std::string(2000, 'a') + "bcd\n"; }
  json m = small_manifest(2);
  m["data"] = {{"train",
                {{"dataset", "text-char"},
                 {"path", "t.txt"},
                 {"partition", {{"name", "dirichlet"}, {"alpha", 0.5}}},
                 {"options", {{"block_size", 8}}}}}};
  try {
    run_json(m, dir.path());
    FAIL("expected a ConfigError");
  } catch (const exogym::sdk::ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "data.train.partition: \"dirichlet\" shares out the examples by label, but the batches of dataset "
          "\"text-char\" have no \"target\" holding one integer per example");
  }
  // From the command line: exit status 2, before any training.
  const auto file = exogym::test::write_manifest(dir, "m", m);
  const auto o = exogym::test::run_cli({"--quiet", file.string()}, dir / "log.txt", 60);
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Catch::Contains("data.train.partition: \"dirichlet\" shares out the examples by label"));
}

TEST_CASE("a Dirichlet partition is the same for any parallelism and over 2 processes",
          "[partition][multiprocess][cli]") {
  TempDir dir("dirichlet-mp");
  json m = counting_manifest(4, {{"name", "dirichlet"}, {"alpha", 0.3}});
  m["compute"] = {{"step_time", "10ms"}};
  std::map<std::string, fs::path> folders;
  for (const std::string layout : {"1", "2"}) {
    m["output"]["dir"] = "out-" + layout;
    const auto file = exogym::test::write_manifest(dir, "m" + layout, m);
    const auto o = exogym::test::run_cli(
        {"--plugin-path", EXOGYM_TEST_PLUGIN_DIR, "--quiet", "--nproc", layout, "--timeout", "20", file.string()},
        dir / ("log" + layout + ".txt"), 60);
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[layout] = exogym::test::run_folder(dir, "out-" + layout);
  }
  m["parallelism"] = 1;
  run_json(m, dir / "serial");
  CHECK(read_text(folders["1"] / "data.csv") == read_text(folders["2"] / "data.csv"));
  CHECK(read_text(folders["1"] / "data.csv") == read_text(dir / "serial" / "run" / "data.csv"));
  CHECK(
      exogym::test::bit_identical(load_model_pt(folders["1"] / "model.pt"), load_model_pt(folders["2"] / "model.pt")));
  CHECK(exogym::test::bit_identical(load_model_pt(folders["1"] / "model.pt"),
                                    load_model_pt(dir / "serial" / "run" / "model.pt")));
}

namespace {

// `nodes` nodes on the node-counting plugin, each node its own dataset.
json node_dataset_manifest(int nodes, const std::string& log) {
  json m = small_manifest(nodes);
  m["model"]["options"]["input_size"] = 1;
  m["data"] = {{"train", {{"dataset", "node-counting"}, {"options", {{"log", log}}}}},
               {"val", {{"dataset", "node-counting"}, {"split", "test"}, {"options", {{"size", 64}}}}}};
  m["eval"]["size"] = 64;
  return m;
}

struct Build {
  std::string split;
  int rank, first_node, local_nodes, num_nodes;
  uint64_t seed;
  long pid;
};

std::vector<Build> builds(const fs::path& log) {
  std::vector<Build> out;
  for (const auto& line : exogym::test::read_lines(log)) {
    std::istringstream in(line);
    Build b;
    in >> b.split >> b.rank >> b.first_node >> b.local_nodes >> b.num_nodes >> b.seed >> b.pid;
    out.push_back(b);
  }
  std::sort(out.begin(), out.end(), [](const Build& a, const Build& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace

TEST_CASE("a per-node dataset plugin is built once per node, with its rank, and each node reads its own",
          "[partition][training]") {
  TempDir dir("node-dataset");
  const fs::path log = dir / "builds.txt";
  run_json(node_dataset_manifest(3, log.string()), dir.path());
  const auto built = builds(log);
  REQUIRE(built.size() == 3);  // the validation set does not log: built once, without "log"
  for (int r = 0; r < 3; ++r) {
    CHECK(built[r].split == "train");
    CHECK(built[r].rank == r);
    CHECK(built[r].first_node == r);
    CHECK(built[r].local_nodes == 1);
    CHECK(built[r].num_nodes == 3);
    CHECK(built[r].seed == 7);
  }
  // Node r has 200 + r examples, of labels (i + r) % 4.
  const auto rows = read_csv(dir / "run" / "data.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == std::map<std::string, std::string>{{"node", "0"},
                                                      {"examples", "200"},
                                                      {"label_0", "50"},
                                                      {"label_1", "50"},
                                                      {"label_2", "50"},
                                                      {"label_3", "50"}});
  CHECK(rows[2].at("examples") == "202");
  CHECK(rows[2].at("label_2") == "51");
  CHECK(rows[2].at("label_3") == "51");
  // A partition only shares out a shared dataset.
  json m = node_dataset_manifest(2, "");
  m["data"]["train"]["partition"] = "contiguous";
  try {
    run_json(m, dir / "partition");
    FAIL("expected a ConfigError");
  } catch (const exogym::sdk::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("data.train.partition: dataset \"node-counting\" is built once per node"));
  }
}

TEST_CASE("over 2 processes, each builds its own nodes' datasets and the run matches one process",
          "[partition][multiprocess][cli]") {
  TempDir dir("node-dataset-mp");
  const fs::path log = dir / "builds.txt";
  json m = node_dataset_manifest(4, log.string());
  m["compute"] = {{"step_time", "10ms"}};
  std::map<std::string, fs::path> folders;
  for (const std::string nproc : {"2", "1"}) {
    m["output"]["dir"] = "out-" + nproc;
    const auto file = exogym::test::write_manifest(dir, "m" + nproc, m);
    const auto o = exogym::test::run_cli(
        {"--plugin-path", EXOGYM_TEST_PLUGIN_DIR, "--quiet", "--nproc", nproc, "--timeout", "20", file.string()},
        dir / ("log" + nproc + ".txt"), 60);
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[nproc] = exogym::test::run_folder(dir, "out-" + nproc);
    if (nproc == "2") {
      const auto built = builds(log);
      REQUIRE(built.size() == 4);
      for (int r = 0; r < 4; ++r) CHECK(built[r].rank == r);
      // Nodes 0 and 1 live in one process, 2 and 3 in the other.
      CHECK(built[0].pid == built[1].pid);
      CHECK(built[2].pid == built[3].pid);
      CHECK(built[0].pid != built[2].pid);
      m["data"]["train"]["options"].erase("log");
    }
  }
  CHECK(read_text(folders["1"] / "data.csv") == read_text(folders["2"] / "data.csv"));
  CHECK(
      exogym::test::bit_identical(load_model_pt(folders["1"] / "model.pt"), load_model_pt(folders["2"] / "model.pt")));
}
