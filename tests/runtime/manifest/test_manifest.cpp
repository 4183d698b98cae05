// The manifest: its schema, defaults, path resolution, error messages naming
// JSON paths, and reading the file. Variants and --set: test_manifest_variants;
// how they patch named objects: test_manifest_patch.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "exogym/runtime/manifest/schema.h"
#include "exogym/sdk/options.h"
#include "manifest_fixtures.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::manifest::load_manifest;
using exogym::runtime::manifest::parse_manifest;
using nlohmann::json;
// The fixtures: minimal(), parse(), parse_one(), config_error(), error_with().
using namespace exogym::test::manifest;

namespace {

class ManifestFolder {
 public:
  ManifestFolder() {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("exogym-manifest-test-" + std::to_string(random()) + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~ManifestFolder() {
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
  CHECK(std::string(m.train_data.partition.name()) == "iid");
  CHECK(m.train_data.json_path == "data.train");
  CHECK_FALSE(m.val_data.has_value());
  CHECK(m.max_steps == 10);
  CHECK(m.batch_size == 64);
  CHECK(m.minibatch_size == 64);
  CHECK(m.eval_interval == 100);
  CHECK(m.eval_size == 0);  // no data.val: evaluation is off
  CHECK(m.eval_batch_size == 64);
  CHECK(m.output_dir == fs::path("/manifests/runs"));
  CHECK(m.model_formats == std::vector<std::string>({"pt", "safetensors"}));
  CHECK(m.base_dir == kBase);
  CHECK(m.run_dir() == fs::path("/manifests/runs/minimal"));

  const json expected = json::parse(R"({
    "name": "minimal", "seed": 42, "nodes": 1, "device": "cpu", "precision": "fp32", "execution": "auto",
    "parallelism": 0, "threads": 0,
    "pin_threads": true,
    "model": {"plugin": "mlp", "options": {}},
    "strategy": {"plugin": "ddp", "options": {}},
    "data": {"train": {"dataset": "mnist", "split": "train", "partition": "iid", "options": {}}},
    "train": {"max_steps": 10, "batch_size": 64, "minibatch_size": 64, "on_nonfinite": "stop"},
    "eval": {"interval": 100, "size": 0, "batch_size": 64},
    "output": {"dir": "/manifests/runs", "save_model": true},
    "checkpoint": {"interval": 0, "keep": 2},
    "network": {"bandwidth": "1Gbit/s", "latency": "10ms", "failure_timeout": "30s"},
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
  CHECK(m.model_formats.empty());
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

TEST_CASE("the $schema key (for editors) is accepted and left out of the resolved manifest", "[manifest]") {
  json with_schema = minimal();
  with_schema["$schema"] = "../examples/manifest.schema.json";
  CHECK(parse_one(with_schema).resolved == parse_one(minimal()).resolved);
  CHECK_FALSE(parse_one(with_schema).resolved.contains("$schema"));
}

TEST_CASE("relative paths resolve against the manifest's folder", "[manifest]") {
  ManifestFolder dir;
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
  CHECK(top.what ==
        "nodse: unknown option; did you mean \"nodes\"? known options: name, seed, seeds, nodes, device, precision, "
        "execution, parallelism, threads, pin_threads, model, strategy, data, train, eval, output, checkpoint, "
        "network, faults, churn, adversaries, participation, compute, runs");

  auto nested = error_with(json::parse(R"({"train": {"max_step": 5}})"));
  CHECK(nested.path == "train.max_step");
  CHECK(nested.what ==
        "train.max_step: unknown option; did you mean \"max_steps\"? known options: max_steps, batch_size, "
        "minibatch_size, on_nonfinite");

  CHECK_THAT(error_with(json::parse(R"({"strategy": {"option": {}}})")).what,
             Catch::StartsWith("strategy.option: unknown option; did you mean \"options\"?"));
  CHECK_THAT(error_with(json::parse(R"({"data": {"train": {"partiton": "iid"}}})")).what,
             Catch::StartsWith("data.train.partiton: unknown option; did you mean \"partition\"?"));
  CHECK_THAT(error_with(json::parse(R"({"output": {"save": true}})")).what,
             Catch::StartsWith("output.save: unknown option; did you mean \"save_model\"?"));
  CHECK_THAT(error_with(json::parse(R"({"network": {"nodes": {"0": {"bandwith": "1Gbit/s"}}}})")).what,
             Catch::StartsWith("network.nodes.0.bandwith: unknown option; did you mean \"bandwidth\"?"));
  CHECK_THAT(error_with({{"run", json::array()}}).what,
             Catch::StartsWith("run: unknown option; did you mean \"runs\"?"));
  CHECK(error_with({{"zzzzzz", 1}}).what ==
        "zzzzzz: unknown option; known options: name, seed, seeds, nodes, device, precision, execution, "
        "parallelism, threads, pin_threads, model, strategy, data, train, eval, output, checkpoint, network, faults, "
        "churn, adversaries, participation, compute, runs");
  // A key holding control characters: shown escaped, so the message prints
  // whole (a NUL would end it); the path keeps the key as written.
  auto nul = error_with({{std::string("\0network\t", 9), 1}});
  CHECK(nul.path == std::string("\0network\t", 9));
  CHECK_THAT(nul.what, Catch::StartsWith("\\u0000network\\u0009: unknown option"));
  CHECK(std::string(nul.what.c_str()) == nul.what);
  // A typo is reported as a typo, not as the key it hides being "required".
  CHECK_THAT(error_with(json::parse(R"({"model": {"plugin": null, "plugn": "mlp"}})")).what,
             Catch::StartsWith("model.plugn: unknown option; did you mean \"plugin\"?"));
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
        "output.save_model: expected true, false or a list of \"pt\", \"safetensors\", got \"yes\"");
  CHECK(error_with(json::parse(R"({"output": {"save_model": ["pt", "onnx"]}})")).what ==
        "output.save_model[1]: expected one of \"pt\", \"safetensors\", got \"onnx\"");
  CHECK(error_with(json::parse(R"({"output": {"save_model": ["pt", "pt"]}})")).what ==
        "output.save_model[1]: \"pt\" appears twice");
  CHECK(error_with(json::parse(R"({"model": {"options": [1]}})")).what == "model.options: expected an object, got [1]");
  CHECK(error_with(json::parse(R"({"strategy": "diloco"})")).what == "strategy: expected an object, got \"diloco\"");
  CHECK(error_with(json::parse(R"({"data": {"train": {"partition": "sorted"}}})")).what ==
        "data.train.partition: expected one of \"iid\", \"contiguous\", \"dirichlet\", \"shards\", \"labels\", got "
        "\"sorted\"");
  CHECK(error_with(json::parse(R"({"data": {"train": {"partition": "IID"}}})")).what ==
        "data.train.partition: expected one of \"iid\", \"contiguous\", \"dirichlet\", \"shards\", \"labels\", got "
        "\"IID\"; did you mean \"iid\"?");
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
  CHECK(plugin.what ==
        "model.plugin: required option missing (a non-empty string: a plugin name (see exogym-run --list-plugins) or "
        "the path of a .so file)");
  json no_strategy = minimal();
  no_strategy.erase("strategy");
  CHECK(config_error([&] { parse(no_strategy); }).what ==
        "strategy: required option missing (an object: the strategy plugin and its options)");
  CHECK_THAT(error_with(json::parse(R"({"train": {"max_steps": null, "batch_size": 8}})")).what,
             Catch::StartsWith("train.max_steps: required option missing (a positive integer: "));
  CHECK_THAT(error_with(json::parse(R"({"data": {"train": null}})")).what,
             Catch::StartsWith("data.train: required option missing (an object: "));
  CHECK_THAT(error_with(json::parse(R"({"data": {"train": {"dataset": null}}})")).what,
             Catch::StartsWith("data.train.dataset: required option missing (a non-empty string: "));
  CHECK(config_error([] { parse(json::array()); }).what == "a manifest must be a JSON object, got []");
}

TEST_CASE("per-node tables validate each entry like the section it overrides", "[manifest]") {
  CHECK(error_with(json::parse(R"({"network": {"nodes": {"0": {"latency": 5}}}})")).what ==
        "network.nodes.0.latency: expected a duration with a unit such as \"10ms\", got 5");
  CHECK(error_with(json::parse(R"({"network": {"nodes": {"0": "slow"}}})")).what ==
        "network.nodes.0: expected an object, got \"slow\"");
  CHECK(error_with(json::parse(R"({"network": {"nodes": []}})")).what ==
        "network.nodes: expected an object keyed by node rank, got []");
  json doc = minimal();
  doc["nodes"] = 2;
  doc["network"] = json::parse(R"({"latency": "5ms", "nodes": {"1": {"bandwidth": "100Mbit/s"}}})");
  doc["compute"] = json::parse(R"({"speed": {"0": 0.5}})");
  const Manifest m = parse_one(doc);
  CHECK(m.network.per_node.at(1).bandwidth == 1e8 / 8);
  CHECK(m.network.per_node.at(1).latency == 0.005);  // left out: the others' latency
  CHECK(m.compute.speed.at(0) == 0.5);
  CHECK(m.resolved["network"]["nodes"] == json::parse(R"({"1": {"bandwidth": "100Mbit/s"}})"));
  CHECK(m.resolved["compute"] == json::parse(R"({"step_time": "measured", "speed": {"0": 0.5}})"));
}

namespace {

// Visits every declared key, with its JSON path.
template <class Fn>
void for_each_spec(const exogym::sdk::OptionSpecs& specs, const std::string& path, Fn&& fn) {
  for (const auto& spec : specs) {
    const std::string spec_path = path.empty() ? spec.name : path + "." + spec.name;
    fn(spec, spec_path);
    for_each_spec(spec.fields, spec_path, fn);
  }
}

}  // namespace

TEST_CASE("the schema documents every key, and the resolved manifest shows every default", "[manifest]") {
  using exogym::sdk::OptionType;
  const auto& schema = exogym::runtime::manifest::manifest_schema();
  const Manifest m = parse_one(minimal());
  for_each_spec(schema, "", [&](const exogym::sdk::OptionSpec& spec, const std::string& path) {
    INFO(path);
    CHECK_FALSE(spec.doc.empty());
    // Keys with a default in sections that are present (not tables' or
    // lists' entries).
    if (spec.default_value.is_null() || path.find("<node>") != std::string::npos ||
        path.find("<item>") != std::string::npos)
      return;
    std::string pointer = "/" + path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const bool in_absent_section = path.rfind("data.val", 0) == 0;
    if (!in_absent_section) CHECK(m.resolved.contains(json::json_pointer(pointer)));
  });
  // Counts that are read as int are bounded so, and seeds span 64 bits.
  for (const auto& spec : schema) {
    if (spec.name == "nodes" || spec.name == "parallelism" || spec.name == "threads") {
      CHECK(spec.maximum == 2147483647u);
    }
    if (spec.name == "seed") CHECK(spec.maximum == 18446744073709551615u);
  }
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
        "name: expected a folder name (letters, digits, '-', '_' and '.'; at most 200 of them), got \"my run\"");
  // Longer fails at mkdir, after the data loaded: refused with the manifest.
  CHECK(error_with({{"name", std::string(201, 'a')}}).path == "name");
  CHECK(error_with({{"name", std::string(200, 'a')}, {"nodes", 0}}).path == "nodes");  // 200 is accepted
  CHECK(error_with({{"name", "../up"}}).path == "name");
  CHECK(config_error([] { parse_manifest(minimal(), kBase, "my manifest"); }).what ==
        "name: not set, and the manifest file's name \"my manifest\" is not a folder name (letters, digits, '-', "
        "'_' and '.'; at most 200 of them); set \"name\"");
  CHECK(config_error([] { parse_manifest(minimal(), kBase, ""); }).what ==
        "name: not set, and there is no manifest file to name the run after");
  json named = minimal();
  named["name"] = "mnist-ddp_v1.2";
  CHECK(parse_manifest(named, kBase, "my manifest").name == "mnist-ddp_v1.2");
}

TEST_CASE("load_manifest reports unreadable files and JSON syntax errors", "[manifest]") {
  ManifestFolder dir;
  const fs::path missing = dir.path() / "nope.json";
  auto not_found = config_error([&] { load_manifest(missing); });
  CHECK(not_found.path.empty());
  CHECK(not_found.what == "manifest file \"" + missing.string() + "\" does not exist");
  CHECK(config_error([&] { load_manifest(dir.path()); }).what ==
        "manifest \"" + dir.path().string() + "\" is a directory, not a file");

  const fs::path broken = dir.write("broken.json", "{\n  \"nodes\": 1,\n  \"seed\": 4 2\n}\n");
  auto syntax = config_error([&] { load_manifest(broken); });
  CHECK(syntax.path.empty());
  CHECK_THAT(syntax.what,
             Catch::StartsWith("invalid JSON in manifest \"" + broken.string() + "\" at line 3, column 13: "));
  CHECK_THAT(syntax.what, Catch::Contains("syntax error"));
  CHECK_THAT(syntax.what, !Catch::Contains("json.exception"));

  // Special files are refused before they are opened: a FIFO would block,
  // /dev/zero never end.
  const fs::path fifo = dir.path() / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const fs::path& special : {fifo, fs::path("/dev/zero"), fs::path("/dev/urandom")}) {
    CHECK(config_error([&] { load_manifest(special); }).what ==
          "manifest \"" + special.string() + "\" is not a regular file");
  }

  const fs::path trailing = dir.write("trailing.json", "{\n  \"nodes\": 1,\n}\n");
  CHECK_THAT(config_error([&] { load_manifest(trailing); }).what, Catch::Contains("at line 3, column 1: "));
}

TEST_CASE("load_manifest rejects duplicate keys and allows comments", "[manifest]") {
  ManifestFolder dir;
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

TEST_CASE("deeply nested JSON and numbers beyond a double are refused with their line and column", "[manifest]") {
  ManifestFolder dir;
  // 60,000 levels crashed the reader (stack overflow); one level per line
  // puts the 65th opening on line 65.
  std::string deep;
  for (int i = 0; i < 60000; ++i) deep += "{\"a\":\n";
  const fs::path nested = dir.write("nested.json", deep);
  const auto too_deep = config_error([&] { load_manifest(nested); });
  CHECK(too_deep.path.empty());
  CHECK(too_deep.what == "invalid JSON in manifest \"" + nested.string() +
                             "\" at line 65, column 1: nested deeper than 64 levels of objects and arrays");
  // Brackets in strings and comments do not count.
  std::string brackets(200, '[');
  const fs::path quoted = dir.write(
      "quoted.json", "{\"name\": \"" + brackets + "\", // " + brackets + "\n \"nodes\": 1 /* " + brackets + " */}");
  CHECK(config_error([&] { load_manifest(quoted); }).what.find("nested deeper") == std::string::npos);

  const fs::path huge = dir.write("huge.json", "{\n  \"seed\": 1,\n  \"train\": {\"lr\": 1e400}\n}\n");
  CHECK(config_error([&] { load_manifest(huge); }).what ==
        "invalid JSON in manifest \"" + huge.string() +
            "\" at line 3, column 19: the number 1e400 is beyond the range of a double (about 1.8e308)");
  CHECK_THAT(config_error([&] { load_manifest(dir.write("neg.json", "[-2e999]")); }).what,
             Catch::Contains("at line 1, column 2: the number -2e999"));
  // Within range: 1e308 reads, and is left to the field's own checks.
  CHECK_THAT(config_error([&] { load_manifest(dir.write("big.json", R"({"nodes": 1e308})")); }).what,
             !Catch::Contains("range of a double"));
}
