// report.html: down-sampling, charts, reading run folders, the page a run
// and exogym-report write, and the metrics the strategies record for it.
// The page in a real browser: report_browser.py.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "exogym/runtime/output/report/downsample.h"
#include "exogym/runtime/output/report/finished_run.h"
#include "exogym/runtime/output/report/line_chart.h"
#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/report/smoothing.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
namespace report = exogym::runtime::output::report;
using exogym::test::occurrences;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using nlohmann::json;

namespace {

// metrics.csv's values of `name` as {step: [value per row]}.
std::map<int, std::vector<double>> metric_rows(const fs::path& run, const std::string& name) {
  std::map<int, std::vector<double>> rows;
  for (const auto& row : read_csv(run / "metrics.csv")) {
    if (row.at("name") == name) rows[std::stoi(row.at("step"))].push_back(std::stod(row.at("value")));
  }
  return rows;
}

json with_report_strategy(json m, const std::string& plugin, const json& options) {
  m["strategy"] = {{"plugin", plugin}, {"options", options}};
  return m;
}

int run_report_tool(const std::string& args, const TempDir& dir, const std::string& prefix = "") {
  const std::string command = prefix + std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-report " + args + " > " +
                              (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("down-sampling keeps each pixel column's smallest and largest value, in order", "[report]") {
  std::vector<double> x, y;
  for (int i = 0; i < 100000; ++i) {
    x.push_back(i);
    y.push_back(i == 51234 ? 50.0 : i == 70000 ? -7.0 : 1.0 + 0.001 * (i % 7));
  }
  y[10] = NAN;
  const auto points = report::downsample(x, y, 0, 99999, 600);
  REQUIRE(points.size() <= 1200);
  REQUIRE(points.size() >= 600);
  bool spike = false, dip = false;
  for (size_t i = 0; i < points.size(); ++i) {
    REQUIRE(std::isfinite(points[i].y));
    if (i) REQUIRE(points[i].x > points[i - 1].x);
    spike = spike || (points[i].x == 51234 && points[i].y == 50.0);
    dip = dip || (points[i].x == 70000 && points[i].y == -7.0);
  }
  REQUIRE(spike);
  REQUIRE(dip);
  // At most one point per column: the series comes back whole.
  const auto few = report::downsample({0, 1, 2, 3}, {4, 3, 2, 1}, 0, 3, 600);
  REQUIRE(few.size() == 4);
  REQUIRE(few[3].x == 3);
  REQUIRE(few[3].y == 1);
}

TEST_CASE("a line chart draws one polyline per series with its points, labels escaped", "[report]") {
  report::Series a{"ddp", "#123456", {0, 1, 2}, {3, 2, 1}};
  report::Series b{"<b>&", "#654321", {0, 2}, {1, NAN}};
  const std::string svg = report::line_chart_svg({"loss", {"step"}, {"loss"}}, {a, b});
  REQUIRE(occurrences(svg, "<polyline class=\"series\"") == 2);
  REQUIRE_THAT(svg, Catch::Contains("data-label=\"ddp\" data-points=\"3\""));
  REQUIRE_THAT(svg, Catch::Contains("data-label=\"&lt;b&gt;&amp;\" data-points=\"1\""));
  REQUIRE(svg.find("<b>") == std::string::npos);
  REQUIRE(report::format_value(1.5e6, report::AxisFormat::Bytes) == "1.50 MB");
}

TEST_CASE("a log x axis places points at log10(x) and leaves out x <= 0", "[report]") {
  report::Series a{"ddp", "#123456", {0, 10, 100, 1000}, {4, 3, 2, 1}};
  report::ChartSpec spec{"bytes-log", {"bytes (log scale)"}, {"loss"}, true};
  const std::string svg = report::line_chart_svg(spec, {a});
  CHECK_THAT(svg, Catch::Contains("data-label=\"ddp\" data-points=\"3\""));
  // x from 1 to 3 (10 to 1000) over the plot's 560 pixels from x = 64: 64, 344, 624.
  CHECK_THAT(svg, Catch::Contains("points=\"64.0,"));
  CHECK_THAT(svg, Catch::Contains(" 344.0,"));
  CHECK_THAT(svg, Catch::Contains(" 624.0,"));
  CHECK_THAT(svg, Catch::Contains(">10</text>") && Catch::Contains(">100</text>") && Catch::Contains(">1000</text>"));
}

TEST_CASE("EMA smoothing as W&B's: debiased, non-finite values skipped, weight 0 the values", "[report]") {
  const std::vector<double> y{1, 2, NAN, 4};
  const auto s = report::ema_smoothed(y, 0.5);
  REQUIRE(s.size() == 4);
  CHECK(s[0] == Approx(1.0));          // 0.5 / (1 - 0.5)
  CHECK(s[1] == Approx(1.25 / 0.75));  // (0.25 + 1) / (1 - 0.25)
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == Approx(2.625 / 0.875));  // (0.625 + 2) / (1 - 0.125)
  const auto same = report::ema_smoothed(y, 0);
  CHECK(same[0] == 1);
  CHECK(same[3] == 4);
}

TEST_CASE("report.html offers log scales and train loss smoothing without script, and prints its table whole",
          "[report]") {
  TempDir dir("report-views");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 6;
  run_json(m, dir.path());
  const std::string page = read_text(dir / "run" / "report.html");
  CHECK_THAT(page, Catch::Contains("<input type=\"checkbox\" id=\"log-scale\">"));
  CHECK_THAT(page, Catch::Contains("id=\"smoothing-90\" value=\"90\">"));
  CHECK(page.find("<script") == std::string::npos);
  // Bytes and simulated time in both scales; the train loss at every smoothing.
  for (const std::string id : {"train-loss-step", "train-loss-step-ema60", "train-loss-step-ema99", "train-loss-time",
                               "train-loss-time-log", "train-loss-time-log-ema90", "train-loss-bytes-ema90",
                               "train-loss-bytes-log-ema99", "val-global-time-log", "val-global-bytes-log"}) {
    INFO(id);
    CHECK(occurrences(page, "id=\"" + id + "\"") == 1);
  }
  CHECK(occurrences(page, "id=\"val-global-bytes-log-ema") == 0);  // validation losses are not smoothed
  CHECK(occurrences(page, "id=\"lr-step-log") == 0);
  CHECK_THAT(page, Catch::Contains(">bytes sent per node (log scale)</text>"));
  CHECK_THAT(page, Catch::Contains(">train loss (EMA 0.99)</text>"));
  // The default views show without :has; the others wait for their control.
  CHECK_THAT(page, Catch::Contains(".scale[data-scale=log]{display:none}"));
  CHECK_THAT(page, Catch::Contains("body:has(#smoothing-90:checked) .smooth[data-smoothing=\"90\"]{display:block}"));
  CHECK_THAT(page, Catch::Contains(".table-wrap{overflow:visible}"));
}

TEST_CASE("a folder that is not a run is a data error naming it, and exogym-report needs one run", "[report]") {
  TempDir dir("report-notrun");
  fs::create_directories(dir / "empty");
  REQUIRE_THROWS_MATCHES(
      report::read_finished_run(dir / "empty"), exogym::sdk::DataError,
      Catch::Matchers::Message((dir / "empty").string() + ": not a run folder (it has no config.json and train.csv)"));
  REQUIRE_THROWS_AS(report::write_report({dir / "empty"}, dir / "r.html", "t"), exogym::sdk::DataError);
  REQUIRE_FALSE(fs::exists(dir / "r.html"));
  REQUIRE(run_report_tool((dir / "empty").string() + " -o " + (dir / "r.html").string(), dir) == 2);
  REQUIRE_THAT(read_text(dir / "out.txt"), Catch::Contains("not a run folder"));
}

TEST_CASE("a run writes report.html from its files: curves, summary, node times, config", "[report]") {
  TempDir dir("report-run");
  json m = with_report_strategy(small_manifest(2), "diloco",
                                {{"H", 5}, {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}, {"max_norm", 1.0}});
  run_json(m, dir.path());
  const std::string page = read_text(dir / "run" / "report.html");
  for (const std::string id : {"train-loss-step", "train-loss-time", "train-loss-bytes", "lr-step", "val-global-step",
                               "val-global-time", "val-global-bytes", "val-local-step", "val-global-accuracy-step",
                               "metric-pseudo_grad_norm", "metric-outer_lr", "metric-grad_norm"}) {
    INFO(id);
    REQUIRE_THAT(page, Catch::Contains("id=\"" + id + "\""));
  }
  // 20 steps: every train row drawn; evaluations at 0, 10 and the end.
  REQUIRE_THAT(page, Catch::Contains("data-label=\"run\" data-points=\"20\""));
  REQUIRE_THAT(page, Catch::Contains("data-label=\"run\" data-points=\"3\""));
  REQUIRE_THAT(page, Catch::Contains("<td>finished</td><td>diloco</td><td>2</td><td>20</td>"));
  REQUIRE_THAT(page, Catch::Contains("run · node 1"));
  REQUIRE_THAT(page, Catch::Contains("&quot;H&quot;: 5"));
  REQUIRE(page.find("<script") == std::string::npos);
  REQUIRE(occurrences(page, "http") ==
          occurrences(page, "http://www.w3.org/2000/svg"));  // no address but the SVG namespace

  // The same page from the folder alone, and, without summary.json, a note
  // that the run did not finish.
  report::write_report({dir / "run"}, dir / "again.html", "test");
  REQUIRE(read_text(dir / "again.html") == page);
  fs::remove(dir / "run" / "summary.json");
  const auto outcome = report::write_report({dir / "run"}, dir / "stopped.html", "test");
  REQUIRE(outcome.notes.size() == 1);
  REQUIRE_THAT(outcome.notes[0], Catch::Contains("has no summary.json"));
  REQUIRE_THAT(read_text(dir / "stopped.html"), Catch::Contains("<td>did not finish</td>"));
}

TEST_CASE("exogym-report: runs of different manifests together, comparison folders, bad folders", "[report]") {
  TempDir dir("report-tool");
  run_json(small_manifest(2), dir / "a");
  run_json(
      with_report_strategy(small_manifest(2), "sparta", {{"p", 0.1}, {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}}),
      dir / "b");
  fs::create_directories(dir / "cmp");
  fs::rename(dir / "b" / "run", dir / "cmp" / "sparta");
  fs::create_directories(dir / "junk");
  const std::string out = (dir / "r.html").string();
  REQUIRE(run_report_tool((dir / "a" / "run").string() + " " + (dir / "cmp").string() + " -o " + out, dir) == 0);
  const std::string page = read_text(out);
  REQUIRE(occurrences(page, "<polyline class=\"series\" data-label=\"run\"") >= 8);
  REQUIRE(occurrences(page, "<polyline class=\"series\" data-label=\"sparta\"") >= 8);
  // Only SPARTA records fraction_sent: its chart says which run lacks it.
  REQUIRE_THAT(page, Catch::Contains("id=\"metric-fraction_sent\""));
  REQUIRE_THAT(page, Catch::Contains("Not recorded by run."));

  // A model without accuracy: its validation.csv lacks the column.
  fs::copy(dir / "a" / "run", dir / "other", fs::copy_options::recursive);
  std::ofstream(dir / "other" / "validation.csv")
      << "step,local_loss,local_perplexity,global_loss,global_perplexity,bytes_sent,sim_time_s\n0,1,2.7,1,2.7,0,0\n";
  const auto outcome = report::write_report({dir / "a" / "run", dir / "other"}, dir / "r2.html", "t");
  REQUIRE(outcome.notes ==
          std::vector<std::string>{
              "other's validation.csv has no global_accuracy, local_accuracy: its charts leave it out."});
  REQUIRE_THAT(read_text(dir / "r2.html"), Catch::Contains("data-label=\"other\" data-points=\"1\""));

  REQUIRE(run_report_tool((dir / "a" / "run").string() + " " + (dir / "junk").string() + " -o " + out, dir) == 2);
  REQUIRE_THAT(read_text(dir / "out.txt"), Catch::Contains("junk: not a run folder"));
  REQUIRE_THAT(read_text(out),
               Catch::Contains("junk: not a run folder (it has no config.json and train.csv): left out"));
}

TEST_CASE("exogym-report: a FIFO, symbolic link loops and a damaged summary.json are errors naming the file",
          "[report]") {
  TempDir dir("report-special");
  run_json(small_manifest(2), dir / "a");
  const fs::path good = dir / "a" / "run";
  auto copy = [&](const std::string& name) {
    fs::copy(good, dir / name, fs::copy_options::recursive);
    return dir / name;
  };
  const fs::path fifo = copy("fifo");
  fs::remove(fifo / "metrics.csv");
  REQUIRE(::mkfifo((fifo / "metrics.csv").c_str(), 0600) == 0);
  const fs::path loop = copy("loop");
  fs::remove(loop / "train.csv");
  fs::create_symlink(loop / "train.csv", loop / "train.csv");
  fs::create_symlink(dir / "ring-b", dir / "ring-a");
  fs::create_symlink(dir / "ring-a", dir / "ring-b");
  const fs::path garbage = copy("garbage");
  std::ofstream(garbage / "summary.json", std::ios::binary) << std::string("\x93\x01garbage\xff{", 11);
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {fifo, (fifo / "metrics.csv").string() + ": a FIFO, not a regular file"},
      {loop, (loop / "train.csv").string() + ": a loop of symbolic links"},
      {dir / "ring-a", (dir / "ring-a").string() + ": not a folder (or a loop of symbolic links)"},
      {garbage, (garbage / "summary.json").string() + ": not a JSON object (damaged?)"},
  };
  for (const auto& [folder, words] : cases) {
    INFO(folder);
    // `timeout`: a tool blocked on the FIFO fails the test instead of hanging it.
    const int code = run_report_tool("-q " + good.string() + " " + folder.string() + " -o " + (dir / "r.html").string(),
                                     dir, "timeout 20 ");
    const std::string out = read_text(dir / "out.txt");
    INFO(out);
    CHECK(code == 2);
    CHECK(out.find(words + ": left out") != std::string::npos);
    CHECK(out.find("filesystem error") == std::string::npos);
    CHECK(read_text(dir / "r.html").find("data-label=\"run\"") != std::string::npos);
  }
}

TEST_CASE("strategies record their metrics: DiLoCo, SPARTA, FedAvg, DeMo, clipping", "[report]") {
  const json sgd = {{"name", "sgd"}, {"lr", 0.1}};
  SECTION("DiLoCo: pseudo-gradient norm and outer LR after every H-th step; grad norm before clipping") {
    TempDir dir("metrics-diloco");
    run_json(with_report_strategy(small_manifest(2), "diloco", {{"H", 5}, {"optimizer", sgd}, {"max_norm", 0.5}}),
             dir.path());
    const auto norms = metric_rows(dir / "run", "pseudo_grad_norm");
    REQUIRE(norms.size() == 4);
    for (int step : {4, 9, 14, 19}) {
      REQUIRE(norms.at(step).size() == 2);  // every node
      REQUIRE(norms.at(step)[0] > 0);
      REQUIRE(norms.at(step)[0] == norms.at(step)[1]);  // the nodes share the average
    }
    for (const auto& [step, values] : metric_rows(dir / "run", "outer_lr")) REQUIRE(values == std::vector{0.7, 0.7});
    const auto grad = metric_rows(dir / "run", "grad_norm");
    REQUIRE(grad.size() == 20);
    REQUIRE(grad.at(0).size() == 2);
    REQUIRE(grad.at(0)[0] > 0);
  }
  SECTION("SPARTA: the fraction of elements averaged") {
    TempDir dir("metrics-sparta");
    run_json(with_report_strategy(small_manifest(2), "sparta",
                                  {{"p", 0.25}, {"selector", "shuffled_sequential"}, {"optimizer", sgd}}),
             dir.path());
    const auto fraction = metric_rows(dir / "run", "fraction_sent");
    REQUIRE(fraction.size() == 20);
    REQUIRE(fraction.at(0)[0] == Approx(0.25).margin(0.02));
  }
  SECTION("FedAvg: each node's island size") {
    TempDir dir("metrics-fedavg");
    run_json(with_report_strategy(small_manifest(3), "fedavg", {{"H", 2}, {"island_size", 2}, {"optimizer", sgd}}),
             dir.path());
    const auto sizes = metric_rows(dir / "run", "island_size");
    REQUIRE(sizes.size() == 10);
    auto round = sizes.at(1);
    std::sort(round.begin(), round.end());
    REQUIRE(round == std::vector<double>{1, 2, 2});
  }
  SECTION("DeMo: the compression ratio") {
    TempDir dir("metrics-demo");
    run_json(with_report_strategy(small_manifest(2), "demo",
                                  {{"lr", 0.01}, {"compression_topk", 4}, {"compression_chunk", 16}}),
             dir.path());
    const auto ratio = metric_rows(dir / "run", "compression_ratio");
    REQUIRE(ratio.size() == 20);
    REQUIRE(ratio.at(0)[0] > 1.0);
  }
}
