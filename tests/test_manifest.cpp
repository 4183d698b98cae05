// The manifest: defaults, path resolution, error messages naming JSON paths,
// --set overrides and "runs" variants.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/error.h"

namespace fs = std::filesystem;
using exogym::runtime::manifest::apply_override;
using exogym::sdk::closest_name;
using exogym::runtime::manifest::load_manifest;
using exogym::runtime::manifest::Manifest;
using exogym::runtime::manifest::ManifestSet;
using exogym::runtime::manifest::parse_manifest;
using exogym::sdk::ConfigError;
using nlohmann::json;

namespace {

class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("exogym-manifest-test-" + std::to_string(random()) + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& relative, const std::string& text) const {
    const fs::path file = path_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  fs::path path_;
};

json minimal() {
  return json::parse(R"({
    "model": {"plugin": "mlp"},
    "strategy": {"plugin": "ddp"},
    "data": {"train": {"dataset": "mnist"}},
    "train": {"max_steps": 10}
  })");
}

const fs::path kBase = "/manifests";

ManifestSet parse(const json& doc, const std::vector<std::string>& overrides = {}) {
  return parse_manifest(doc, kBase, "minimal", overrides);
}

Manifest parse_one(const json& doc, const std::vector<std::string>& overrides = {}) {
  ManifestSet set = parse(doc, overrides);
  REQUIRE(set.runs.size() == 1);
  return set.runs.front();
}

struct Caught {
  std::string path;
  std::string what;
};

template <class Fn>
Caught config_error(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& error) {
    return {error.path(), error.what()};
  }
  FAIL("expected a ConfigError");
  return {};
}

// The error parse() raises for `minimal()` with `patch` merged in.
Caught error_with(const json& patch, const std::vector<std::string>& overrides = {}) {
  json doc = minimal();
  doc.merge_patch(patch);
  return config_error([&] { parse(doc, overrides); });
}

}  // namespace

TEST_CASE("a minimal manifest gets every default", "[manifest]") {
  ManifestSet set = parse(minimal());
  CHECK(set.name == "minimal");
  CHECK_FALSE(set.has_variants);
  REQUIRE(set.runs.size() == 1);
  const Manifest& m = set.runs.front();
  CHECK(m.name == "minimal");
  CHECK(m.variant.empty());
  CHECK(m.seed == 42);
  CHECK(m.nodes == 1);
  CHECK(m.device == "cpu");
  CHECK(m.parallelism == 0);
  CHECK(m.threads == 0);
  CHECK(m.model.plugin == "mlp");
  CHECK(m.model.options == json::object());
  CHECK(m.model.path == "model");
  CHECK(m.strategy.plugin == "ddp");
  CHECK(m.strategy.path == "strategy");
  CHECK(m.train_data.dataset == "mnist");
  CHECK(m.train_data.path.empty());
  CHECK(m.train_data.split == "train");
  CHECK(m.train_data.partition == "iid");
  CHECK(m.train_data.json_path == "data.train");
  CHECK_FALSE(m.val_data.has_value());
  CHECK(m.max_steps == 10);
  CHECK(m.batch_size == 64);
  CHECK(m.minibatch_size == 64);
  CHECK(m.eval_interval == 100);
  CHECK(m.eval_size == 0);  // no data.val: evaluation is off
  CHECK(m.eval_batch_size == 64);
  CHECK(m.output_dir == fs::path("/manifests/runs"));
  CHECK(m.save_model);
  CHECK(m.base_dir == kBase);
  CHECK(m.run_dir() == fs::path("/manifests/runs/minimal"));

  const json expected = json::parse(R"({
    "name": "minimal", "seed": 42, "nodes": 1, "device": "cpu", "parallelism": 0, "threads": 0, "pin_threads": true,
    "model": {"plugin": "mlp", "options": {}},
    "strategy": {"plugin": "ddp", "options": {}},
    "data": {"train": {"dataset": "mnist", "split": "train", "partition": "iid", "options": {}}},
    "train": {"max_steps": 10, "batch_size": 64, "minibatch_size": 64},
    "eval": {"interval": 100, "size": 0, "batch_size": 64},
    "output": {"dir": "/manifests/runs", "save_model": true},
    "network": {"bandwidth": "1Gbit/s", "latency": "10ms"},
    "compute": {"step_time": "measured"}
  })");
  CHECK(m.resolved == expected);
  CHECK(m.network.link.bandwidth == 1e9 / 8);
  CHECK(m.network.link.latency == 0.010);
  CHECK(m.network.per_node.empty());
  CHECK_FALSE(m.compute.step_time.has_value());
  CHECK(m.compute.speed.empty());
  CHECK_FALSE(m.target_loss.has_value());
}

TEST_CASE("validation data turns evaluation on with its own defaults", "[manifest]") {
  const Manifest m = parse_one(json::parse(R"({
    "name": "withval", "seed": 7, "nodes": 4, "parallelism": 2, "threads": 1,
    "model": {"plugin": "mlp", "options": {"hidden": [256]}},
    "strategy": {"plugin": "diloco", "options": {"H": 20}},
    "data": {"train": {"dataset": "mnist", "path": "/data/mnist"},
             "val": {"dataset": "mnist", "path": "/data/mnist", "options": {"limit": 5}}},
    "train": {"max_steps": 1e3, "batch_size": 128, "minibatch_size": 32},
    "output": {"save_model": false}
  })"));
  CHECK(m.name == "withval");
  CHECK(m.seed == 7);
  CHECK(m.nodes == 4);
  CHECK(m.parallelism == 2);
  CHECK(m.threads == 1);
  CHECK(m.model.options == json::parse(R"({"hidden": [256]})"));
  CHECK(m.strategy.options == json::parse(R"({"H": 20})"));
  REQUIRE(m.val_data.has_value());
  CHECK(m.val_data->split == "test");
  CHECK(m.val_data->json_path == "data.val");
  CHECK(m.val_data->path == fs::path("/data/mnist"));
  CHECK(m.val_data->options == json::parse(R"({"limit": 5})"));
  CHECK(m.max_steps == 1000);  // integral floats are integers
  CHECK(m.eval_size == 1024);
  CHECK(m.eval_batch_size == 32);  // defaults to train.minibatch_size
  CHECK_FALSE(m.save_model);
  CHECK(m.resolved["eval"] == json::parse(R"({"interval": 100, "size": 1024, "batch_size": 32})"));
  CHECK(m.resolved["train"]["max_steps"] == 1000);
  CHECK(m.resolved["data"]["val"]["path"] == "/data/mnist");
}

TEST_CASE("the resolved manifest is itself a manifest that resolves to itself", "[manifest]") {
  json doc = minimal();
  doc["data"]["train"]["path"] = "data/mnist";
  doc["data"]["val"] = {{"dataset", "mnist"}};
  const Manifest first = parse_one(doc);
  // Paths are absolute now, so another base folder changes nothing.
  const Manifest again = parse_manifest(first.resolved, "/elsewhere", "other").runs.front();
  CHECK(again.resolved == first.resolved);
}

TEST_CASE("relative paths resolve against the manifest's folder", "[manifest]") {
  TempDir dir;
  const fs::path file = dir.write("experiments/exp1.json", R"({
    "model": {"plugin": "mlp"},
    "strategy": {"plugin": "ddp"},
    "data": {"train": {"dataset": "mnist", "path": "data/mnist"},
             "val": {"dataset": "mnist", "path": "../shared/./mnist/"}},
    "train": {"max_steps": 10},
    "output": {"dir": "out"}
  })");
  const ManifestSet set = load_manifest(file);
  const Manifest& m = set.runs.front();
  const fs::path folder = fs::absolute(dir.path() / "experiments");
  CHECK(set.name == "exp1");  // the file's stem
  CHECK(m.base_dir == folder);
  CHECK(m.train_data.path == folder / "data" / "mnist");
  CHECK(m.val_data->path == fs::absolute(dir.path()) / "shared" / "mnist");
  CHECK(m.output_dir == folder / "out");
  CHECK(m.run_dir() == folder / "out" / "exp1");
  CHECK(m.resolved["data"]["train"]["path"] == (folder / "data" / "mnist").string());
  CHECK(m.resolved["output"]["dir"] == (folder / "out").string());
}

TEST_CASE("unknown keys name their path and suggest the known key", "[manifest]") {
  auto top = error_with({{"nodse", 4}});
  CHECK(top.path == "nodse");
  CHECK(top.what == "nodse: unknown key; did you mean \"nodes\"?");

  auto nested = error_with(json::parse(R"({"train": {"max_step": 5}})"));
  CHECK(nested.path == "train.max_step");
  CHECK(nested.what == "train.max_step: unknown key; did you mean \"max_steps\"?");

  CHECK(error_with(json::parse(R"({"strategy": {"option": {}}})")).what ==
        "strategy.option: unknown key; did you mean \"options\"?");
  CHECK(error_with(json::parse(R"({"data": {"train": {"partiton": "iid"}}})")).what ==
        "data.train.partiton: unknown key; did you mean \"partition\"?");
  CHECK(error_with(json::parse(R"({"output": {"save": true}})")).what ==
        "output.save: unknown key; did you mean \"save_model\"?");
  CHECK(error_with({{"zzzzzz", 1}}).what ==
        "zzzzzz: unknown key (expected one of: name, seed, nodes, device, parallelism, threads, pin_threads, model, "
        "strategy, "
        "data, train, eval, output, network, compute, runs)");
  // A typo is reported as a typo, not as the key it hides being "required".
  CHECK(error_with(json::parse(R"({"model": {"plugin": null, "plugn": "mlp"}})")).what ==
        "model.plugn: unknown key; did you mean \"plugin\"?");
}

TEST_CASE("ill-typed values name their path and the value", "[manifest]") {
  CHECK(error_with({{"nodes", 0}}).what == "nodes: expected a positive integer, got 0");
  auto quoted = error_with({{"nodes", "4"}});
  CHECK(quoted.path == "nodes");
  CHECK(quoted.what == "nodes: expected a positive integer, got \"4\"");
  CHECK(error_with({{"nodes", 2.5}}).what == "nodes: expected a positive integer, got 2.5");
  CHECK(error_with({{"nodes", 3e9}}).what ==
        "nodes: expected a positive integer no larger than 2147483647, got 3000000000.0");
  auto steps = error_with(json::parse(R"({"train": {"max_steps": -1}})"));
  CHECK(steps.path == "train.max_steps");
  CHECK(steps.what == "train.max_steps: expected a positive integer, got -1");
  CHECK(error_with(json::parse(R"({"train": {"max_steps": "ten"}})")).what ==
        "train.max_steps: expected a positive integer, got \"ten\"");
  CHECK(error_with({{"seed", -1}}).what == "seed: expected a non-negative integer, got -1");
  CHECK(error_with({{"parallelism", true}}).what == "parallelism: expected a non-negative integer, got true");
  CHECK(error_with(json::parse(R"({"eval": {"batch_size": 0}})")).what ==
        "eval.batch_size: expected a positive integer, got 0");
  CHECK(error_with(json::parse(R"({"output": {"save_model": "yes"}})")).what ==
        "output.save_model: expected true or false, got \"yes\"");
  CHECK(error_with(json::parse(R"({"model": {"options": [1]}})")).what == "model.options: expected an object, got [1]");
  CHECK(error_with(json::parse(R"({"strategy": "diloco"})")).what == "strategy: expected an object, got \"diloco\"");
  CHECK(error_with(json::parse(R"({"data": {"train": {"partition": "dirichlet"}}})")).what ==
        "data.train.partition: expected \"iid\" or \"contiguous\", got \"dirichlet\"");
  CHECK(error_with(json::parse(R"({"data": {"train": {"dataset": ""}}})")).what ==
        "data.train.dataset: expected a non-empty string, got \"\"");

  // Large unsigned seeds are valid seeds, and eval counts may be 0.
  json doc = minimal();
  doc["seed"] = 18446744073709551615ULL;
  doc["eval"] = {{"interval", 0}, {"size", 0}};
  const Manifest m = parse_one(doc);
  CHECK(m.seed == 18446744073709551615ULL);
  CHECK(m.eval_interval == 0);
}

TEST_CASE("missing required keys name their path", "[manifest]") {
  auto plugin = error_with(json::parse(R"({"model": {"plugin": null, "options": {}}})"));
  CHECK(plugin.path == "model.plugin");
  CHECK(plugin.what == "model.plugin: required");
  json no_strategy = minimal();
  no_strategy.erase("strategy");
  CHECK(config_error([&] { parse(no_strategy); }).what == "strategy: required");
  CHECK(error_with(json::parse(R"({"train": {"max_steps": null, "batch_size": 8}})")).what ==
        "train.max_steps: required");
  CHECK(error_with(json::parse(R"({"data": {"train": null}})")).what == "data.train: required");
  CHECK(error_with(json::parse(R"({"data": {"train": {"dataset": null}}})")).what == "data.train.dataset: required");
  CHECK(config_error([] { parse(json::array()); }).what == "a manifest must be a JSON object, got []");
}

TEST_CASE("train.minibatch_size must divide train.batch_size", "[manifest]") {
  auto caught = error_with(json::parse(R"({"train": {"minibatch_size": 48}})"));
  CHECK(caught.path == "train.minibatch_size");
  CHECK(caught.what == "train.minibatch_size: must divide train.batch_size (64) exactly, got 48");
  const Manifest m = parse_one(minimal(), {"train.batch_size=256", "train.minibatch_size=64"});
  CHECK(m.batch_size == 256);
  CHECK(m.minibatch_size == 64);
}

TEST_CASE("device strings are checked for syntax", "[manifest]") {
  for (const std::string device : {"cpu", "auto", "cuda", "cuda:0", "cuda:1,3", "cuda:0,1,2,3"}) {
    json doc = minimal();
    doc["device"] = device;
    CHECK(parse_one(doc).device == device);
  }
  for (const std::string device : {"gpu", "CUDA", "cuda:", "cuda:a", "cuda:0,", "cuda:0,,1", "cuda: 0", "cpu:0"}) {
    auto caught = error_with({{"device", device}});
    CHECK(caught.path == "device");
    CHECK(caught.what ==
          "device: expected \"cpu\", \"auto\", \"cuda\", \"cuda:N\" or \"cuda:N,M,...\", got \"" + device + "\"");
  }
  CHECK(error_with({{"device", "cuda:0,1,0"}}).what == "device: lists cuda:0 twice, got \"cuda:0,1,0\"");
}

TEST_CASE("run names must be folder names", "[manifest]") {
  CHECK(error_with({{"name", "my run"}}).what ==
        "name: expected a folder name (letters, digits, '-', '_' and '.'), got \"my run\"");
  CHECK(error_with({{"name", "../up"}}).path == "name");
  CHECK(config_error([] { parse_manifest(minimal(), kBase, "my manifest"); }).what ==
        "name: not set, and the manifest file's name \"my manifest\" is not a folder name (letters, digits, '-', "
        "'_' and '.'); set \"name\"");
  json named = minimal();
  named["name"] = "mnist-ddp_v1.2";
  CHECK(parse_manifest(named, kBase, "my manifest").name == "mnist-ddp_v1.2");
}

TEST_CASE("overrides (--set) parse JSON values and create objects", "[manifest]") {
  json doc = {{"train", {{"max_steps", 10}}}};
  apply_override(doc, "train.max_steps=5");
  apply_override(doc, "strategy.options.H=20");
  apply_override(doc, "strategy.options.lr=3e-4");
  apply_override(doc, "strategy.options.nesterov=true");
  apply_override(doc, "strategy.options.optimizer={\"name\": \"adamw\"}");
  apply_override(doc, "strategy.options.hidden=[128,64]");
  apply_override(doc, "device=cuda:0");
  apply_override(doc, "name=\"quoted\"");
  apply_override(doc, "strategy.options.clip=null");
  apply_override(doc, "strategy.options.text=a=b");  // only the first '=' splits
  apply_override(doc, "strategy.options.empty=");
  CHECK(doc["train"]["max_steps"] == 5);
  CHECK(doc["strategy"]["options"]["H"] == 20);
  CHECK(doc["strategy"]["options"]["lr"] == Approx(3e-4));
  CHECK(doc["strategy"]["options"]["nesterov"] == true);
  CHECK(doc["strategy"]["options"]["optimizer"] == json({{"name", "adamw"}}));
  CHECK(doc["strategy"]["options"]["hidden"] == json({128, 64}));
  CHECK(doc["device"] == "cuda:0");
  CHECK(doc["name"] == "quoted");
  CHECK(doc["strategy"]["options"]["clip"].is_null());
  CHECK(doc["strategy"]["options"]["text"] == "a=b");
  CHECK(doc["strategy"]["options"]["empty"] == "");

  const Manifest m = parse_one(minimal(), {"nodes=8", "strategy.plugin=diloco", "strategy.options.H=20",
                                           "output.save_model=false", "data.val={\"dataset\": \"mnist\"}"});
  CHECK(m.nodes == 8);
  CHECK(m.strategy.plugin == "diloco");
  CHECK(m.strategy.options == json({{"H", 20}}));
  CHECK_FALSE(m.save_model);
  CHECK(m.val_data.has_value());
  // Overridden values are validated like the file's.
  CHECK(config_error([] { parse(minimal(), {"nodes=0"}); }).what == "nodes: expected a positive integer, got 0");
}

TEST_CASE("overrides (--set) with bad syntax are errors at path --set", "[manifest]") {
  json doc = minimal();
  auto no_equals = config_error([&] { apply_override(doc, "nodes"); });
  CHECK(no_equals.path == "--set");
  CHECK(no_equals.what == "--set: expected key=value (e.g. train.max_steps=100), got \"nodes\"");
  CHECK(config_error([&] { apply_override(doc, "=5"); }).what ==
        "--set: expected key=value with a non-empty key, got \"=5\"");
  CHECK(config_error([&] { apply_override(doc, "train..max_steps=5"); }).what ==
        "--set: empty component in key \"train..max_steps\"");
  CHECK(config_error([&] { apply_override(doc, "train.=5"); }).what == "--set: empty component in key \"train.\"");
  CHECK(config_error([&] { apply_override(doc, "runs=[]"); }).path == "--set");
  CHECK(config_error([&] { apply_override(doc, "train.max_steps.x=1"); }).what ==
        "--set: cannot set \"train.max_steps.x\": train.max_steps is 10, not an object");
  CHECK(doc == minimal());  // failed overrides change nothing
}

namespace {

json comparison() {
  return json::parse(R"({
    "name": "cmp",
    "model": {"plugin": "mlp"},
    "strategy": {"plugin": "ddp", "options": {"H": 10, "lr": 0.1}},
    "data": {"train": {"dataset": "mnist"}, "val": {"dataset": "mnist"}},
    "train": {"max_steps": 100},
    "runs": [
      {"strategy": {"plugin": "diloco", "options": {"H": 20}}},
      {"name": "sparta-fast", "strategy": {"plugin": "sparta"}, "nodes": 8},
      {"train": {"max_steps": 3}, "data": {"val": null}}
    ]
  })");
}

}  // namespace

TEST_CASE("runs expand into variants merged over the base", "[manifest]") {
  const ManifestSet set = parse(comparison());
  CHECK(set.has_variants);
  CHECK(set.name == "cmp");
  REQUIRE(set.runs.size() == 3);
  const Manifest& diloco = set.runs[0];
  const Manifest& sparta = set.runs[1];
  const Manifest& third = set.runs[2];

  CHECK(diloco.variant == "diloco");  // named after its strategy
  CHECK(sparta.variant == "sparta-fast");
  CHECK(third.variant == "run2");
  for (const auto& m : set.runs) {
    CHECK(m.name == "cmp");
    CHECK(m.resolved["name"] == "cmp");
    CHECK_FALSE(m.resolved.contains("runs"));
  }

  // Merge-patch semantics: objects merge key by key, except that a variant
  // switching to another plugin does not inherit the base plugin's options.
  CHECK(diloco.strategy.plugin == "diloco");
  CHECK(diloco.strategy.options == json({{"H", 20}}));
  CHECK(diloco.nodes == 1);
  CHECK(sparta.strategy.plugin == "sparta");
  CHECK(sparta.strategy.options == json::object());
  CHECK(third.strategy.options == json({{"H", 10}, {"lr", 0.1}}));
  CHECK(sparta.nodes == 8);
  CHECK(third.strategy.plugin == "ddp");
  CHECK(third.max_steps == 3);
  CHECK(diloco.max_steps == 100);
  // null deletes: the third variant has no validation data, so no evaluation.
  CHECK_FALSE(third.val_data.has_value());
  CHECK(third.eval_size == 0);
  CHECK(diloco.eval_size == 1024);

  CHECK(diloco.run_dir() == fs::path("/manifests/runs/cmp/diloco"));
  CHECK(sparta.run_dir() == fs::path("/manifests/runs/cmp/sparta-fast"));
}

TEST_CASE("a variant that keeps its plugin merges its options over the base's", "[manifest]") {
  json m = comparison();
  m["runs"] = json::array({{{"name", "a"}, {"strategy", {{"plugin", "ddp"}, {"options", {{"lr", 0.5}}}}}}});
  const ManifestSet set = parse(m);
  CHECK(set.runs[0].strategy.options == json({{"H", 10}, {"lr", 0.5}}));
}

TEST_CASE("variants cannot move their output folder", "[manifest]") {
  json m = comparison();
  m["runs"][1]["output"] = {{"dir", "elsewhere"}};
  REQUIRE_THROWS_WITH(parse(m), "runs[1].output: cannot differ between variants; set it in the base manifest");
}

TEST_CASE("a variant's default name comes from its strategy plugin", "[manifest]") {
  json doc = comparison();
  doc["runs"] = json::parse(R"([
    {"strategy": {"plugin": "plugins/build/exogym_strategy_demo.so"}},
    {"strategy": {"options": {"H": 5}}},
    {"name": null, "strategy": {"plugin": "fedavg"}}
  ])");
  const ManifestSet set = parse(doc);
  CHECK(set.runs[0].variant == "demo");
  CHECK(set.runs[1].variant == "run1");
  CHECK(set.runs[2].variant == "fedavg");
}

TEST_CASE("overrides (--set) apply to every variant and win over variant values", "[manifest]") {
  const ManifestSet set = parse(comparison(), {"train.max_steps=5", "nodes=2"});
  REQUIRE(set.runs.size() == 3);
  for (const auto& m : set.runs) {
    CHECK(m.max_steps == 5);
    CHECK(m.nodes == 2);
    CHECK(m.resolved["train"]["max_steps"] == 5);
  }
  CHECK(config_error([] { parse(comparison(), {"runs.0.nodes=2"}); }).path == "--set");
}

TEST_CASE("variant errors name the variant", "[manifest]") {
  json duplicate = comparison();
  duplicate["runs"] = json::parse(R"([{"strategy": {"plugin": "diloco"}}, {"strategy": {"plugin": "diloco"}}])");
  auto dup = config_error([&] { parse(duplicate); });
  CHECK(dup.path == "runs[1].name");
  CHECK(dup.what ==
        "runs[1].name: duplicate variant name \"diloco\" (runs[0] has it too); give each variant a distinct \"name\"");

  auto with_runs = [](const char* runs) {
    json doc = comparison();
    doc["runs"] = json::parse(runs);
    return config_error([&] { parse(doc); });
  };
  // Keys the variant sets carry its index.
  CHECK(with_runs(R"([{"name": "a"}, {"name": "b", "nodes": 0}])").what ==
        "runs[1].nodes: expected a positive integer, got 0");
  CHECK(with_runs(R"([{"nodse": 2}])").what == "runs[0].nodse: unknown key; did you mean \"nodes\"?");
  CHECK(with_runs(R"([{"model": null}])").what == "runs[0].model: required");
  CHECK(with_runs(R"([{"name": "a b"}])").what ==
        "runs[0].name: expected a folder name (letters, digits, '-', '_' and '.'), got \"a b\"");
  CHECK(with_runs(R"([{"runs": []}])").what == "runs[0].runs: a variant cannot have variants of its own");
  CHECK(with_runs(R"([3])").what == "runs[0]: expected an object (a partial manifest), got 3");
  CHECK(with_runs(R"([])").what == "runs: expected at least one variant, got []");
  CHECK(with_runs(R"({"a": {}})").what == "runs: expected an array of partial manifests, got {\"a\":{}}");

  // Faults of the base keep the base's path and say which variant showed them.
  json no_strategy = comparison();
  no_strategy.erase("strategy");
  no_strategy["runs"] = json::parse(R"([{"strategy": {"plugin": "ddp"}}, {"nodes": 2}])");
  auto base_fault = config_error([&] { parse(no_strategy); });
  CHECK(base_fault.path == "strategy");
  CHECK(base_fault.what == "strategy: required (in variant \"run1\", runs[1])");

  // A base that lacks what every variant supplies is fine.
  no_strategy["runs"][1]["strategy"] = {{"plugin", "diloco"}};
  CHECK(parse(no_strategy).runs.size() == 2);
}

TEST_CASE("load_manifest reports unreadable files and JSON syntax errors", "[manifest]") {
  TempDir dir;
  const fs::path missing = dir.path() / "nope.json";
  auto not_found = config_error([&] { load_manifest(missing); });
  CHECK(not_found.path.empty());
  CHECK(not_found.what == "manifest file \"" + missing.string() + "\" does not exist");
  CHECK(config_error([&] { load_manifest(dir.path()); }).what ==
        "manifest \"" + dir.path().string() + "\" is a directory, not a file");

  const fs::path broken = dir.write("broken.json", "{\n  \"nodes\": 1,\n  \"seed\": 4 2\n}\n");
  auto syntax = config_error([&] { load_manifest(broken); });
  CHECK(syntax.path.empty());
  CHECK_THAT(syntax.what, Catch::StartsWith("invalid JSON in manifest \"" + broken.string() + "\" at line 3, column 13: "));
  CHECK_THAT(syntax.what, Catch::Contains("syntax error"));
  CHECK_THAT(syntax.what, !Catch::Contains("json.exception"));

  const fs::path trailing = dir.write("trailing.json", "{\n  \"nodes\": 1,\n}\n");
  CHECK_THAT(config_error([&] { load_manifest(trailing); }).what, Catch::Contains("at line 3, column 1: "));
}

TEST_CASE("load_manifest rejects duplicate keys and allows comments", "[manifest]") {
  TempDir dir;
  auto dup = config_error([&] { load_manifest(dir.write("dup.json", R"({"nodes": 1, "nodes": 2})")); });
  CHECK(dup.path == "nodes");
  CHECK(dup.what == "nodes: duplicate key (JSON would keep only the last value)");
  CHECK(config_error([&] {
          load_manifest(dir.write("nested.json", R"({"strategy": {"plugin": "a", "options": {"H": 1, "H": 2}}})"));
        }).path == "strategy.options.H");
  CHECK(config_error([&] {
          load_manifest(dir.write("array.json", R"({"runs": [{"nodes": 1}, {"name": "x", "seed": 1, "name": "y"}]})"));
        }).path == "runs[1].name");

  const fs::path commented = dir.write("commented.json", R"({
    // Hand-written manifests deserve comments.
    "model": {"plugin": "mlp"},  /* the model */
    "strategy": {"plugin": "ddp"},
    "data": {"train": {"dataset": "mnist"}},
    "train": {"max_steps": 10}
  })");
  CHECK(load_manifest(commented, {"nodes=3"}).runs.front().nodes == 3);
}

TEST_CASE("closest_name suggests near misses only", "[manifest]") {
  const std::vector<std::string> keys = {"name", "nodes", "seed", "max_steps", "lr"};
  CHECK(closest_name("nodse", keys) == "nodes");  // a swap costs 1
  CHECK(closest_name("max_step", keys) == "max_steps");
  CHECK(closest_name("Nodes", keys) == "nodes");
  CHECK(closest_name("maxsteps", keys) == "max_steps");
  CHECK(closest_name("zzzzz", keys).empty());
  CHECK(closest_name("x", keys).empty());  // 2 edits away from "lr", but nothing in common
  CHECK(closest_name("nods", {"node", "nodes"}) == "node");  // ties go to the first
  CHECK(closest_name("anything", {}).empty());
}
