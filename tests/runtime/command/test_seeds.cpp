// "seeds": every variant run once per seed (manifest and --seeds), the
// comparison's mean ± standard deviation, the report's mean curves with
// bands, and each seed's run equal to a plain run with that seed.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "cli_helpers.h"
#include "exogym/runtime/command/comparison.h"
#include "exogym/runtime/command/resume.h"
#include "exogym/runtime/command/variants_runner.h"
#include "exogym/runtime/manifest/seeds.h"
#include "exogym/runtime/output/report/finished_run.h"
#include "exogym/runtime/output/report/line_chart.h"
#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/report/seed_groups.h"
#include "exogym/runtime/train/training.h"
#include "exogym/runtime/util/mean_std.h"
#include "helpers.h"
#include "manifest_fixtures.h"
#include "testing.h"

namespace fs = std::filesystem;
namespace report = exogym::runtime::output::report;
using exogym::runtime::train::TrainingResult;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using nlohmann::json;
using namespace exogym::test::manifest;
using exogym::test::occurrences;

namespace {

json two_variants() {
  json m = minimal();
  m["name"] = "cmp";
  m["runs"] = json::array({{{"name", "a"}}, {{"name", "b"}, {"nodes", 2}}});
  return m;
}

TrainingResult fake_run(const std::string& variant, double local_loss, double wall) {
  TrainingResult r;
  r.name = "cmp";
  r.variant = variant;
  r.strategy_plugin = "diloco";
  r.nodes = 4;
  r.steps = 100;
  r.final_eval = exogym::runtime::train::EvalRecord{};
  r.final_eval->local.loss = local_loss;
  r.final_eval->global.loss = 2 * local_loss;
  r.last_train_loss = local_loss;
  r.simulated.bytes_sent_per_node = 1000;
  r.simulated.time_s = 2;
  r.wall_seconds = wall;
  return r;
}

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

exogym::runtime::command::VariantsResult run_set(const json& m, const TempDir& dir) {
  const auto set = exogym::runtime::manifest::parse_manifest(m, dir.path(), "test");
  exogym::runtime::command::VariantsOptions options;
  options.progress = exogym::runtime::output::Progress::Mode::Quiet;
  return exogym::runtime::command::run_variants(set, exogym::test::test_loader(), options);
}

}  // namespace

TEST_CASE("seeds: every variant runs once per seed, each in its variant's seed-N folder", "[seeds][manifest]") {
  json m = two_variants();
  m["seeds"] = {3, 1};
  const ManifestSet set = parse(m);
  REQUIRE(set.runs.size() == 4);
  CHECK(set.compares());
  CHECK(set.seeds == std::vector<uint64_t>{3, 1});
  const std::vector<std::pair<std::string, uint64_t>> expected = {{"a", 3}, {"a", 1}, {"b", 3}, {"b", 1}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const Manifest& run = set.runs[i];
    CHECK(run.variant == expected[i].first);
    CHECK(run.seed == expected[i].second);
    CHECK(run.resolved["seed"] == expected[i].second);
    CHECK_FALSE(run.resolved.contains("seeds"));  // config.json is a plain run's manifest
    CHECK(run.run_subdir() == fs::path(expected[i].first) / ("seed-" + std::to_string(expected[i].second)));
    CHECK(run.run_dir() == kBase / "runs" / "cmp" / run.run_subdir());
  }
  CHECK(set.runs[2].nodes == 2);

  json single = minimal();
  single["seeds"] = {5};
  const ManifestSet one = parse(single);
  REQUIRE(one.runs.size() == 1);
  CHECK(one.compares());
  CHECK(one.runs[0].run_dir() == kBase / "runs" / "minimal" / "seed-5");

  // Without seeds nothing changes: the folder, the seed, no comparison.
  const ManifestSet plain = parse(minimal());
  CHECK_FALSE(plain.compares());
  CHECK(plain.runs[0].run_dir() == kBase / "runs" / "minimal");
  CHECK(plain.runs[0].run_subdir().empty());
  CHECK(plain.runs[0].seed == 42);
  CHECK(parse(two_variants()).runs[1].run_dir() == kBase / "runs" / "cmp" / "b");
}

TEST_CASE("seeds: bad lists are errors naming the JSON path or the flag", "[seeds][manifest]") {
  CHECK(error_with({{"seeds", json::array()}}).what == "seeds: expected at least one seed, got []");
  CHECK(error_with({{"seeds", {1, 2, 1}}}).what ==
        "seeds[2]: duplicate seed 1 (seeds[0] has it too): a seed run twice is the same run");
  CHECK(error_with({{"seeds", {1, -2}}}).path == "seeds[1]");
  CHECK(error_with({{"seeds", {1, 1.5}}}).path == "seeds[1]");
  CHECK(error_with({{"seeds", {1, nullptr}}}).path == "seeds[1]");
  CHECK(error_with({{"seeds", 3}}).path == "seeds");
  CHECK(error_with({{"seeds", "1,2"}}).path == "seeds");
  CHECK(error_with({{"seeds", {1, 2}}, {"seed", 3}}).what ==
        "seed: set either \"seed\" or \"seeds\", not both (exogym-run --seeds replaces both)");
  json variant_seed = two_variants();
  variant_seed["seeds"] = {1, 2};
  variant_seed["runs"][1]["seed"] = 4;
  CHECK(config_error([&] { parse(variant_seed); }).path == "runs[1].seed");
  variant_seed["runs"][1].erase("seed");
  variant_seed["runs"][0]["seeds"] = {4};
  CHECK(config_error([&] { parse(variant_seed); }).path == "runs[0].seeds");

  using exogym::runtime::manifest::parse_seed_list;
  using exogym::runtime::manifest::seed_overrides;
  CHECK(parse_seed_list("7") == std::vector<uint64_t>{7});
  CHECK(parse_seed_list("3,1,18446744073709551615") == std::vector<uint64_t>{3, 1, UINT64_MAX});
  for (const char* bad : {"", "1,,2", "1,", "a", "-1", "1.5", " 1", "18446744073709551616"}) {
    INFO(bad);
    const auto caught = config_error([&] { parse_seed_list(bad); });
    CHECK(caught.path == "--seeds");
    CHECK(caught.what.find("expected comma-separated non-negative integers") != std::string::npos);
  }
  CHECK(config_error([] { parse_seed_list("1,2,1"); }).what ==
        "--seeds: duplicate seed 1 (seeds[0] has it too): a seed run twice is the same run");
  // --seeds replaces the manifest's seed and seeds, in variants too.
  json m = two_variants();
  m["seed"] = 9;
  const ManifestSet set = parse(m, seed_overrides({4, 5}));
  REQUIRE(set.runs.size() == 4);
  CHECK(set.runs[3].seed == 5);
  m.erase("seed");
  m["seeds"] = {1, 2, 3};
  CHECK(parse(m, seed_overrides({8})).runs.size() == 2);
  CHECK(seed_overrides({}).empty());
}

TEST_CASE("seeds: the comparison shows the mean and sample standard deviation over each variant's seeds", "[seeds]") {
  std::vector<TrainingResult> runs = {fake_run("a", 1, 10), fake_run("a", 2, 20), fake_run("a", 3, 30),
                                      fake_run("b", 0.5, 5)};
  const std::string table = exogym::runtime::command::comparison_table(runs);
  INFO(table);
  CHECK(occurrences(table, "\n") == 4);  // header, rule, a, b
  CHECK(table.find("seeds") != std::string::npos);
  CHECK(table.find("2.0000 ± 1.0000") != std::string::npos);  // local loss 1, 2, 3: n - 1
  CHECK(table.find("4.0000 ± 2.0000") != std::string::npos);  // global loss 2, 4, 6
  CHECK(table.find("20.0 ± 10.0") != std::string::npos);      // wall
  CHECK(table.find("1.00 kB ± 0 B") != std::string::npos);    // bytes: the same for every seed
  CHECK(table.find("0.5000  ") != std::string::npos);         // one seed: no ±
  CHECK(occurrences(table, "±") == 6);                        // variant a's six number columns
  const auto lines = [&] {
    std::vector<std::string> out;
    std::stringstream in(table);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }();
  // Columns line up: every line as wide as the rule ("±" is one column).
  for (const auto& line : lines) {
    size_t width = 0;
    for (unsigned char c : line) width += (c & 0xC0) != 0x80;
    CHECK(width == lines[1].size());
  }

  const std::string csv = exogym::runtime::command::comparison_csv(runs);
  std::stringstream in(csv);
  std::string header, a, b;
  std::getline(in, header);
  std::getline(in, a);
  std::getline(in, b);
  CHECK(header.rfind("variant,strategy,nodes,steps,seeds,local_loss,local_loss_std,global_loss,global_loss_std,", 0) ==
        0);
  CHECK(a.rfind("a,diloco,4,100,3,2.0000,1.0000,4.0000,2.0000,", 0) == 0);
  CHECK(b.rfind("b,diloco,4,100,1,0.5000,,1.0000,,", 0) == 0);

  // The target: over the seeds that reached it, and how many did.
  for (auto& r : runs) r.target_loss = 1.0;
  runs[0].target_hit = exogym::runtime::train::TargetHit{40, 1.5};
  runs[2].target_hit = exogym::runtime::train::TargetHit{50, 2.5};
  const std::string with_target = exogym::runtime::command::comparison_table(runs);
  INFO(with_target);
  CHECK(with_target.find("45 ± 7.1 (2/3)") != std::string::npos);
  const std::string target_csv = exogym::runtime::command::comparison_csv(runs);
  CHECK(target_csv.find(",target_step,target_step_std,target_reached,target_sim_time_s,") != std::string::npos);
  CHECK(target_csv.find(",45,7.1,2,2.000000,0.707107,") != std::string::npos);

  // Without seeds: no seeds column, the table as it always was.
  const std::vector<TrainingResult> plain = {fake_run("a", 1, 10), fake_run("b", 0.5, 5)};
  CHECK(exogym::runtime::command::comparison_csv(plain).rfind("variant,strategy,nodes,steps,local_loss,global_loss,",
                                                              0) == 0);
  CHECK(exogym::runtime::command::comparison_table(plain).find("±") == std::string::npos);
}

TEST_CASE("seeds: a seed's run is bit-identical to a plain run with that seed, with one row and one band per variant",
          "[seeds][report]") {
  TempDir dir("seeds-runs");
  json m = small_manifest(2);
  m["name"] = "cmp";
  m.erase("seed");
  m["seeds"] = {5, 6};
  m["runs"] =
      json::array({{{"name", "sgd"}}, {{"name", "fast"}, {"strategy", {{"options", {{"optimizer", {{"lr", 0.3}}}}}}}}});
  const auto result = run_set(m, dir);
  const fs::path cmp = dir / "out" / "cmp";
  CHECK(result.folder == cmp);
  REQUIRE(result.runs.size() == 4);
  for (const char* variant : {"sgd", "fast"}) {
    for (const char* seed : {"seed-5", "seed-6"}) REQUIRE(fs::exists(cmp / variant / seed / "model.pt"));
  }

  json plain = small_manifest(2);
  plain["seed"] = 6;
  plain["output"]["dir"] = "plain";
  const auto single = run_set(plain, dir);
  CHECK(file_bytes(single.folder / "model.pt") == file_bytes(cmp / "sgd" / "seed-6" / "model.pt"));
  CHECK(file_bytes(cmp / "sgd" / "seed-5" / "model.pt") != file_bytes(cmp / "sgd" / "seed-6" / "model.pt"));
  CHECK(json::parse(read_text(cmp / "sgd" / "seed-6" / "config.json"))["seed"] == 6);

  const auto rows = read_csv(cmp / "comparison.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("variant") == "sgd");
  CHECK(rows[0].at("seeds") == "2");
  const auto loss = [&](const char* variant, const char* seed) {
    return json::parse(read_text(cmp / variant / seed / "summary.json"))["final"]["global_loss"].get<double>();
  };
  const double l5 = loss("fast", "seed-5"), l6 = loss("fast", "seed-6");
  CHECK(std::stod(rows[1].at("global_loss")) == Approx((l5 + l6) / 2).margin(1e-4));
  CHECK(std::stod(rows[1].at("global_loss_std")) == Approx(std::abs(l5 - l6) / std::sqrt(2.0)).margin(1e-4));
  CHECK(read_text(cmp / "comparison.txt") == result.table);

  // The report: one mean line and one band per variant in each chart.
  const std::string html = read_text(cmp / "report.html");
  const size_t charts = occurrences(html, "class=\"line-chart\"");
  CHECK(charts >= 9);
  CHECK(occurrences(html, "<polyline class=\"series\" data-label=\"sgd\"") == charts);
  CHECK(occurrences(html, "<polygon class=\"band\" data-label=\"sgd\"") == charts);
  CHECK(occurrences(html, "<polygon class=\"band\" data-label=\"fast\"") == charts);
  CHECK(html.find("finished, 2 seeds") != std::string::npos);
  // exogym-report's view of the folders: the seed folders of each variant.
  const auto folders = report::expand_run_folders({cmp});
  CHECK(folders == std::vector<fs::path>{cmp / "sgd" / "seed-5", cmp / "sgd" / "seed-6", cmp / "fast" / "seed-5",
                                         cmp / "fast" / "seed-6"});
}

TEST_CASE("seeds: the report merges runs that differ only in their seed, row by row", "[seeds][report]") {
  TempDir dir("seeds-merge");
  std::vector<report::FinishedRun> runs;
  for (uint64_t seed : {1, 2, 3}) {
    report::FinishedRun run;
    run.dir = dir / "v" / ("seed-" + std::to_string(seed));
    run.label = "v";
    run.config = {{"name", "x"}, {"seed", seed}, {"runtime", {{"run_dir", run.dir.string()}}}};
    run.train.header = {"step", "train_loss"};
    run.train.columns["step"] = {1, 2, 3};
    run.train.columns["train_loss"] = {double(seed), 2.0 * seed, seed == 3 ? NAN : 1.0};
    if (seed == 2) run.train.columns["step"].pop_back(), run.train.columns["train_loss"].pop_back();
    run.summary = json{{"steps", 3}, {"final", {{"global_loss", 0.5 * seed}}}, {"strategy", "ddp"}};
    runs.push_back(std::move(run));
  }
  report::FinishedRun other = runs[0];
  other.label = "w";  // another variant: kept apart
  runs.push_back(other);
  report::FinishedRun repeat = runs[0];  // the same seed again: not a second sample
  runs.push_back(repeat);

  const auto merged = report::merge_seeds(runs);
  REQUIRE(merged.size() == 3);
  const report::FinishedRun& v = merged[0];
  CHECK(v.seeds == std::vector<uint64_t>{1, 2, 3});
  CHECK(v.dir == dir / "v");
  CHECK(v.config["seeds"] == json({1, 2, 3}));
  CHECK_FALSE(v.config.contains("seed"));
  REQUIRE(v.train.rows() == 2);  // the shortest seed's rows
  CHECK(v.train.at("train_loss") == std::vector<double>{2, 4});
  CHECK(v.train.spread.at("train_loss") == std::vector<double>{1, 2});
  CHECK(v.summary->at("final").at("global_loss") == Approx(1.0));
  CHECK(v.summary_spread->at("final").at("global_loss") == Approx(0.5));
  CHECK(v.summary->at("strategy") == "ddp");
  CHECK(merged[1].label == "w");
  // Equal values (a constant learning rate): exactly that value, spread 0.
  CHECK(exogym::runtime::util::mean_std({1e-3, 1e-3, 1e-3}).mean == 1e-3);
  CHECK(exogym::runtime::util::mean_std({1e-3, 1e-3, 1e-3}).std == 0);
  CHECK(std::isnan(exogym::runtime::util::mean_std({2.0}).std));
  CHECK(merged[1].seeds.empty());
  CHECK(merged[2].seeds.empty());
}

TEST_CASE("seeds: a band draws under its line, also when it is flat but for rounding", "[seeds][report]") {
  report::Series s{"v", "#123456", {1, 2, 3}, {0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002}};
  s.spread = {2e-19, 2e-19, 2e-19};  // once hung the chart's ticks (steps too small to add)
  const std::string svg = report::line_chart_svg({"c", {"step"}, {"lr"}}, {s});
  CHECK(occurrences(svg, "<polygon class=\"band\" data-label=\"v\" data-points=\"6\"") == 1);
  CHECK(svg.find("<polygon") < svg.find("<polyline"));
  CHECK(occurrences(svg, "<text") >= 4);
}

TEST_CASE(
    "exogym-run --seeds: over --nproc 2 each seed runs in turn, equal to one process, a seed resumes, bad lists exit 2",
    "[seeds][cli][slow]") {
  TempDir dir("seeds-cli");
  json m = small_manifest(2);
  m["output"]["dir"] = (dir / "out").string();
  const fs::path manifest = exogym::test::write_manifest(dir, "m", m);
  const fs::path log = dir / "log.txt";

  auto bad = exogym::test::run_cli({manifest.string(), "--seeds", "1,x"}, log);
  CHECK(bad.code == 2);
  CHECK(bad.output.find("--seeds: expected comma-separated non-negative integers") != std::string::npos);
  bad = exogym::test::run_cli({"--resume", (dir / "out").string(), "--seeds", "1"}, log);
  CHECK(bad.code == 2);
  CHECK(bad.output.find("--seeds: cannot change a run being resumed") != std::string::npos);

  // The manifest's "seed": 7 is replaced, not an error.
  const auto two = exogym::test::run_cli({manifest.string(), "--quiet", "--nproc", "2", "--seeds", "3,4"}, log, 300);
  INFO(two.output);
  REQUIRE(two.code == 0);
  const fs::path seeded = dir / "out" / "test";
  REQUIRE(fs::exists(seeded / "comparison.csv"));
  CHECK(read_csv(seeded / "comparison.csv").at(0).at("seeds") == "2");
  CHECK(json::parse(read_text(seeded / "seed-4" / "config.json"))["seed"] == 4);
  const auto one = exogym::test::run_cli(
      {manifest.string(), "--quiet", "--set", "seed=4", "--set", "output.dir=" + (dir / "one").string()}, log, 300);
  REQUIRE(one.code == 0);
  CHECK(file_bytes(seeded / "seed-4" / "model.pt") == file_bytes(dir / "one" / "test" / "model.pt"));

  // A seed's folder resumes as a plain run does; the comparison's folder
  // resumes as a whole (both seeds finished: nothing to train).
  const auto checkpointed =
      exogym::test::run_cli({manifest.string(), "--quiet", "--seeds", "1,2", "--set", "checkpoint.interval=10", "--set",
                             "output.dir=" + (dir / "ck").string()},
                            log, 300);
  REQUIRE(checkpointed.code == 0);
  CHECK(exogym::test::run_cli({"--resume", (dir / "ck" / "test").string(), "--quiet"}, log).code == 0);
  const auto resumed = exogym::test::run_cli(
      {"--resume", (dir / "ck" / "test" / "seed-2").string(), "--quiet", "--set", "train.max_steps=30"}, log, 300);
  INFO(resumed.output);
  CHECK(resumed.code == 0);
  CHECK(read_csv(dir / "ck" / "test" / "seed-2" / "train.csv").size() == 30);
}

TEST_CASE("seeds: variants.json grows by a line per seed, and reads back every run", "[seeds][manifest]") {
  TempDir dir("seeds-record");
  json m = two_variants();
  json seeds = json::array();
  for (int seed = 1; seed <= 2000; ++seed) seeds.push_back(seed);
  m["seeds"] = seeds;
  const ManifestSet set = parse(m);
  std::vector<const Manifest*> runs;
  for (const auto& run : set.runs) runs.push_back(&run);
  exogym::runtime::command::write_variants_record(dir.path(), runs);
  // Two variants' manifests, then about 60 bytes a run.
  const auto bytes = fs::file_size(dir / "variants.json");
  CHECK(bytes < 2 * read_text(dir / "variants.json").find("\"seed-2\"") + 100 * 4000);
  const ManifestSet back = exogym::runtime::command::resumed_manifest(dir.path(), {});
  REQUIRE(back.runs.size() == 4000);
  for (size_t i = 0; i < set.runs.size(); i += 333) {
    INFO(i);
    CHECK(back.runs[i].variant == set.runs[i].variant);
    CHECK(back.runs[i].seed == set.runs[i].seed);
    CHECK(back.runs[i].resolved == set.runs[i].resolved);
    CHECK(back.runs[i].nodes == set.runs[i].nodes);
  }
  CHECK(back.seeds == set.seeds);
}

TEST_CASE("seeds: the dataset cache keeps the last run's datasets only, so memory stays flat in the seeds", "[seeds]") {
  TempDir dir("seeds-cache");
  exogym::runtime::train::DatasetCache cache;
  std::weak_ptr<const exogym::sdk::Dataset> first;
  size_t per_run = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    json m = small_manifest(2);
    m["seed"] = seed;
    m["train"]["max_steps"] = 2;
    m["eval"]["interval"] = 0;
    auto set = exogym::runtime::manifest::parse_manifest(m, dir.path(), "test");
    exogym::runtime::train::TrainingOptions options;
    options.progress = exogym::runtime::output::Progress::Mode::Quiet;
    options.run_dir = dir / ("seed-" + std::to_string(seed));
    options.dataset_cache = &cache;
    exogym::runtime::train::train_run(set.runs.at(0), exogym::test::test_loader(), options);
    if (seed == 1) {
      REQUIRE_FALSE(cache.entries.empty());
      first = cache.entries.begin()->second;
      per_run = cache.entries.size();
    }
    cache.end_run();
    // One seed's datasets (the synthetic set depends on the seed).
    CHECK(cache.entries.size() == per_run);
    CHECK(cache.used.empty());
  }
  CHECK(first.expired());
}
