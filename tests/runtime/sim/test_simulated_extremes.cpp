// Network and compute values at the edge of what a simulated clock can add
// up (issue #53): a bandwidth of 1e-308bit/s, a latency of 1e308h and a
// lognormal spread of 1000 trained to the end and then wrote null into
// summary.json (or exited 1 with the JSON library's message); they are
// refused at start-up at their JSON path. A clock that can still overflow
// (a compute speed of 1e-300 with a long step) ends the run as usual, its
// infinite times written as "inf", never null, and its report made.
#include <functional>

#include "cli_helpers.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("network and compute values whose simulated times would not be finite are refused at their path",
          "[accounting][manifest]") {
  auto error_with = [](const std::function<void(json&)>& edit) {
    json m = small_manifest(2);
    edit(m);
    return check_run_error(m);
  };
  CHECK(error_with([](json& m) {
          m["network"] = {{"bandwidth", "1e-308bit/s"}};
        }) == "network.bandwidth: expected a bandwidth of at least 1 bit/s, got \"1e-308bit/s\"");
  CHECK(error_with([](json& m) {
          m["network"] = {{"latency", "1e308h"}};
        }) == "network.latency: expected a duration of at most 1e12 s (about 31,700 years), got \"1e308h\"");
  CHECK(error_with([](json& m) {
          m["network"] = {{"nodes", {{"1", {{"latency", "1e300h"}}}}}};
        }) == "network.nodes.1.latency: expected a duration of at most 1e12 s (about 31,700 years), got \"1e300h\"");
  CHECK(error_with([](json& m) {
          m["compute"] = {{"step_time", "1e308h"}};
        }) == "compute.step_time: expected a duration of at most 1e12 s (about 31,700 years), got \"1e308h\"");
  CHECK(error_with([](json& m) {
          m["network"] = {{"bandwidth_distribution", {{"name", "lognormal"}, {"sigma", 1000}}}};
        }) == "network.bandwidth_distribution.sigma: expected a spread of at most 10 (factors within e^±86), got 1000");
  CHECK(error_with([](json& m) {
          m["compute"] = {{"speed_distribution", {{"name", "lognormal"}, {"sigma", 10.5}}}};
        }) == "compute.speed_distribution.sigma: expected a spread of at most 10 (factors within e^±86), got 10.5");
  CHECK(error_with([](json& m) {
          m["network"] = {{"bandwidth_distribution", {{"name", "lognormal"}, {"sigma", 10}}}};
        }) == "(no error)");
}

TEST_CASE("a simulated clock that overflows ends the run with \"inf\" in summary.json, never null, and a report",
          "[accounting]") {
  TempDir dir("clock-overflow");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 4;
  // 1e12 s of compute at a speed of 1e-300: 1e312 s, beyond a double.
  m["compute"] = {{"step_time", "1e12s"}, {"speed", {{"0", 1e-300}}}};
  m["output"]["dir"] = (dir / "out").string();
  const Outcome o = run_cli({write_manifest(dir, "m", m).string(), "--progress=none"}, dir / "cli.log");
  INFO(o.output);
  REQUIRE(o.code == 0);
  const fs::path run = dir / "out" / "test";
  const std::string text = read_text(run / "summary.json");
  const json summary = json::parse(text);
  CHECK(summary.at("simulated").at("time_s") == "inf");
  CHECK(summary.at("communication").at("per_node").at(0).at("compute_s") == "inf");
  CHECK(summary.at("communication").at("per_node").at(1).at("compute_s") == 4e12);
  CHECK(text.find("null") == std::string::npos);
  CHECK(fs::exists(run / "report.html"));
}

}  // namespace exogym::test
