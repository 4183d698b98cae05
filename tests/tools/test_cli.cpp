// The command-line tools as a user meets them: the same flag syntax, --version,
// verbosity, exit statuses and machine-readable progress in every tool.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "exogym/build_config.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::read_lines;
using exogym::test::read_text;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using nlohmann::json;

namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

// Runs build/bin/<tool> with `args` (shell words), stdout and stderr apart.
Outcome run_tool(const std::string& tool, const std::string& args, const TempDir& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command =
      std::string(EXOGYM_BINARY_DIR) + "/bin/" + tool + " " + args + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
}

fs::path write_manifest(const TempDir& dir, json manifest) {
  manifest["output"]["dir"] = (dir / "runs").string();
  const fs::path file = dir / "m.json";
  std::ofstream(file) << manifest.dump(2);
  return file;
}

}  // namespace

TEST_CASE("every tool prints its version from the build, with the plugin ABI", "[cli]") {
  TempDir dir("version");
  for (const std::string tool : {"exogym-run", "exogym-generate", "exogym-report"}) {
    const Outcome o = run_tool(tool, "--version", dir);
    INFO(tool << ": " << o.out << o.err);
    CHECK(o.code == 0);
    CHECK_THAT(o.out, Catch::StartsWith(tool + " " + EXOGYM_VERSION + " (plugin ABI "));
  }
}

TEST_CASE("flags take their value as --flag value or --flag=value", "[cli]") {
  TempDir dir("flagsyntax");
  json m = small_manifest(2);
  m["runs"] = {{{"name", "a"}}, {{"name", "b"}}};
  const fs::path file = write_manifest(dir, m);
  for (const std::string form : {"--only=b --set=train.max_steps=3", "--only b --set train.max_steps=3"}) {
    const Outcome o = run_tool("exogym-run", "--quiet " + form + " " + file.string(), dir);
    INFO(form << ": " << o.err);
    REQUIRE(o.code == 0);
    CHECK(o.out.find("\nb ") != std::string::npos);  // the table has variant b ...
    CHECK(o.out.find("\na ") == std::string::npos);  // ... and not a
  }
  const auto config = json::parse(read_text(dir / "runs" / "test" / "b" / "config.json"));
  CHECK(config["train"]["max_steps"] == 3);
}

TEST_CASE("exit statuses: 0 success, 2 usage or input error, 1 failure while running", "[cli]") {
  TempDir dir("exits");
  const fs::path good = write_manifest(dir, small_manifest(2));
  CHECK(run_tool("exogym-run", "--help", dir).code == 0);
  CHECK_THAT(run_tool("exogym-run", "--help", dir).out,
             Catch::Contains("Several processes") && Catch::Contains("--progress") && Catch::Contains("--set"));

  Outcome o = run_tool("exogym-run", "--no-such-flag " + good.string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::Contains("--no-such-flag") && Catch::Contains("--help"));
  CHECK(run_tool("exogym-run", "--nproc abc " + good.string(), dir).code == 2);
  CHECK(run_tool("exogym-run", "--nproc=0 " + good.string(), dir).code == 2);
  CHECK(run_tool("exogym-run", "--timeout 1e308 " + good.string(), dir).code == 2);
  o = run_tool("exogym-run", "--quiet", dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::Contains("manifest"));
  o = run_tool("exogym-run", "--nproc 2 --rank 0 " + good.string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::Contains("--nproc") && Catch::Contains("--rank"));
  o = run_tool("exogym-run", (dir / "missing.json").string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::Contains("does not exist"));

  CHECK(run_tool("exogym-generate", "", dir).code == 2);  // no run folder
  CHECK(run_tool("exogym-generate", "--tokens -3 " + dir.path().string(), dir).code == 2);
  CHECK(run_tool("exogym-generate", (dir / "nope").string(), dir).code == 2);  // not a run folder
}

TEST_CASE("verbosity: -q hides information, --log-level and -v show debug lines", "[cli]") {
  TempDir dir("verbosity");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 2;
  const fs::path file = write_manifest(dir, m);
  const std::string plain = run_tool("exogym-run", "--progress=none " + file.string(), dir).err;
  CHECK_THAT(plain, Catch::Contains("info"));
  CHECK_THAT(plain, !Catch::Contains("debug"));
  CHECK_THAT(run_tool("exogym-run", "-q " + file.string(), dir).err, !Catch::Contains("info"));
  CHECK_THAT(run_tool("exogym-run", "--progress=none --log-level=debug " + file.string(), dir).err,
             Catch::Contains("debug"));
  CHECK_THAT(run_tool("exogym-run", "--progress=none -v " + file.string(), dir).err, Catch::Contains("debug"));
  const Outcome bad = run_tool("exogym-run", "--log-level loud " + file.string(), dir);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--log-level"));
}

TEST_CASE("JSON-lines progress (--progress=jsonl) writes one JSON object per event on stdout", "[cli]") {
  TempDir dir("jsonl");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 20;
  m["eval"] = {{"interval", 10}, {"size", 64}};
  const Outcome o = run_tool("exogym-run", "--progress=jsonl " + write_manifest(dir, m).string(), dir);
  REQUIRE(o.code == 0);
  std::vector<json> events;
  std::stringstream lines(o.out);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    REQUIRE(json::accept(line));  // nothing but JSON on stdout
    events.push_back(json::parse(line));
  }
  REQUIRE(events.size() >= 5);
  CHECK(events.front()["event"] == "start");
  CHECK(events.front()["max_steps"] == 20);
  std::vector<json> validations;
  for (const auto& e : events) {
    if (e["event"] == "validation") validations.push_back(e);
  }
  // Before steps 0 and 10, and the final evaluation.
  REQUIRE(validations.size() == 3);
  CHECK(validations[2]["step"] == 20);
  CHECK(validations[2]["global_loss"].is_number());
  CHECK(validations[2]["global_metrics"]["accuracy"].is_number());
  const json& finish = events[events.size() - 2];
  CHECK(finish["event"] == "finish");
  CHECK(finish["step"] == 20);
  CHECK(finish["loss"].is_number());
  CHECK(finish["lr"] == 0.1);
  CHECK(events.back()["event"] == "done");
  CHECK(fs::exists(fs::path(events.back()["outputs"].get<std::string>()) / "summary.json"));
}

TEST_CASE("an internal check names the file and line and says it is a bug", "[cli][sdk]") {
  try {
    EXOGYM_CHECK_INTERNAL(1 + 1 == 3, "arithmetic is off");
    FAIL("no throw");
  } catch (const exogym::sdk::InternalError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("internal error at tests/tools/test_cli.cpp:") &&
                             Catch::Contains("1 + 1 == 3") && Catch::Contains("arithmetic is off") &&
                             Catch::Contains("bug"));
  }
  // Not an sdk::Error: nothing reports it as the user's mistake.
  CHECK_FALSE(std::is_base_of_v<exogym::sdk::Error, exogym::sdk::InternalError>);
}

TEST_CASE("exogym-run --schema prints the manifest's JSON Schema with every plugin's options", "[cli][manifest]") {
  TempDir dir("schema");
  const Outcome o = run_tool("exogym-run", "--schema", dir);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const json schema = json::parse(o.out);
  CHECK(schema["$schema"] == "http://json-schema.org/draft-07/schema#");
  CHECK(schema["required"] == json({"model", "strategy", "data", "train"}));
  CHECK(schema["properties"]["nodes"]["default"] == 1);
  // DiLoCo's options when "strategy" names it, with their types and defaults.
  const json* diloco = nullptr;
  for (const auto& branch : schema["properties"]["strategy"]["allOf"])
    if (branch["if"]["properties"]["plugin"]["const"] == "diloco") diloco = &branch["then"]["properties"]["options"];
  REQUIRE(diloco != nullptr);
  CHECK((*diloco)["additionalProperties"] == false);
  CHECK((*diloco)["properties"]["H"]["type"] == json({"integer", "null"}));
  CHECK((*diloco)["properties"]["H"]["minimum"] == 1);
  CHECK((*diloco)["properties"]["H"]["default"] == 100);
  CHECK((*diloco)["properties"]["outer_optimizer"]["default"]["nesterov"] == true);
  // Variants are partial manifests: nothing required.
  CHECK(schema["properties"]["runs"]["items"] == json({{"$ref", "#/definitions/variant"}}));
  CHECK_FALSE(schema["definitions"]["variant"].contains("required"));

  const Outcome with_manifest = run_tool("exogym-run", "--schema m.json", dir);
  CHECK(with_manifest.code == 2);
  CHECK_THAT(with_manifest.err, Catch::Contains("manifest excludes --schema"));
  const Outcome with_value = run_tool("exogym-run", "--schema=maybe", dir);
  CHECK(with_value.code == 2);
  CHECK_THAT(with_value.err, Catch::Contains("--schema"));
}

namespace {

// faulty's options for a ConfigError ("deliberately refused") from `where`,
// on node 1 at step 0.
json refusing_strategy(const std::string& where) {
  return {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
          {"options", {{"fail_in", where}, {"fail_mode", "config"}, {"fail_node", 1}, {"fail_step", 0}}}};
}

}  // namespace

TEST_CASE("a ConfigError from a strategy's init() is the user's: exit 2, its options' path, the variant, no progress",
          "[cli]") {
  TempDir dir("initrefused");
  json m = small_manifest(2);
  m["runs"] = {{{"name", "ddp"}}, {{"name", "refused"}, {"strategy", refusing_strategy("init")}}};
  const fs::path file = write_manifest(dir, m);
  const Outcome o = run_tool("exogym-run", "--progress=lines --only refused " + file.string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::EndsWith("exogym-run: " + file.string() +
                                    ": strategy.options.fail_step: deliberately refused for the test (found by node "
                                    "1 at step 0, init of strategy \"" EXOGYM_TEST_PLUGIN_DIR
                                    "/exogym_strategy_faulty.so\" (" EXOGYM_TEST_PLUGIN_DIR
                                    "/exogym_strategy_faulty.so)) (in variant \"refused\")\n"));
  CHECK_THAT(o.err, !Catch::Contains(" step 0/20"));  // no progress line of a run that never stepped
}

TEST_CASE("an option error names the variant whether the option check or the plugin's constructor found it", "[cli]") {
  TempDir dir("variantwording");
  json m = small_manifest(2);
  json bad_value = refusing_strategy("step");
  bad_value["options"]["fail_mode"] = "fp8";
  m["runs"] = {{{"name", "declared"}, {"strategy", bad_value}},
               {{"name", "constructor"}, {"strategy", refusing_strategy("constructor")}}};
  const fs::path file = write_manifest(dir, m);
  Outcome o = run_tool("exogym-run", "--only declared " + file.string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::StartsWith("exogym-run: " + file.string() + ": strategy.options.fail_mode: ") &&
                        Catch::EndsWith(" (in variant \"declared\")\n"));
  o = run_tool("exogym-run", "--only constructor " + file.string(), dir);
  CHECK(o.code == 2);
  CHECK_THAT(o.err, Catch::EndsWith("exogym-run: " + file.string() +
                                    ": strategy.options.fail_step: deliberately refused for the test (in variant "
                                    "\"constructor\")\n"));
}

TEST_CASE("a run that fails before its first step leaves no folder, and the next run takes its name", "[cli]") {
  TempDir dir("nofolder");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 2;
  m["strategy"] = refusing_strategy("init");
  CHECK(run_tool("exogym-run", "-q " + write_manifest(dir, m).string(), dir).code == 2);
  // A comparison whose first variant fails in init(), or whose data is missing.
  json compare = small_manifest(2);
  compare["train"]["max_steps"] = 2;
  compare["runs"] = {{{"name", "refused"}, {"strategy", refusing_strategy("init")}}, {{"name", "ddp"}}};
  CHECK(run_tool("exogym-run", "-q " + write_manifest(dir, compare).string(), dir).code == 2);
  compare["runs"] = {{{"name", "ddp"},
                      {"data", {{"train", {{"dataset", "mnist"}, {"path", "no-such-folder"}, {"options", nullptr}}}}}}};
  CHECK(run_tool("exogym-run", "-q " + write_manifest(dir, compare).string(), dir).code == 2);
  CHECK((!fs::exists(dir / "runs") || fs::is_empty(dir / "runs")));
  m["strategy"] = small_manifest(2)["strategy"];
  CHECK(run_tool("exogym-run", "-q " + write_manifest(dir, m).string(), dir).code == 0);
  CHECK(fs::exists(dir / "runs" / "test" / "summary.json"));  // the name, not test-4
  CHECK_FALSE(fs::exists(dir / "runs" / "test-2"));
  // A comparison that trained a variant before one failed keeps that one.
  compare["runs"] = {{{"name", "ddp"}}, {{"name", "refused"}, {"strategy", refusing_strategy("init")}}};
  CHECK(run_tool("exogym-run", "-q " + write_manifest(dir, compare).string(), dir).code == 2);
  CHECK(fs::exists(dir / "runs" / "test-2" / "ddp" / "summary.json"));
  CHECK_FALSE(fs::exists(dir / "runs" / "test-2" / "refused"));
  CHECK_FALSE(fs::exists(dir / "runs" / "test-3"));
}
