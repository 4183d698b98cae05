// The manifest's "runs" variants (JSON merge patches over the base) and the
// --set overrides that apply to the base and every variant.
#include "exogym/runtime/manifest/overrides.h"
#include "exogym/runtime/train/training.h"
#include "helpers.h"
#include "manifest_fixtures.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::manifest::apply_override;
using nlohmann::json;
// The fixtures: minimal(), parse(), parse_one(), config_error(), error_with().
using namespace exogym::test::manifest;

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
  CHECK_FALSE(doc["strategy"]["options"].contains("clip"));  // null removes, as in a variant
  CHECK(doc["strategy"]["options"]["text"] == "a=b");
  CHECK(doc["strategy"]["options"]["empty"] == "");

  const Manifest m = parse_one(minimal(), {"nodes=8", "strategy.plugin=diloco", "strategy.options.H=20",
                                           "output.save_model=false", "data.val={\"dataset\": \"mnist\"}"});
  CHECK(m.nodes == 8);
  CHECK(m.strategy.plugin == "diloco");
  CHECK(m.strategy.options == json({{"H", 20}}));
  CHECK(m.model_formats.empty());
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

TEST_CASE("a variant that switches plugin is warned of the base's options the new plugin declares too", "[manifest]") {
  json m = minimal();
  m["strategy"] = json::parse(
      R"({"plugin": "diloco", "options": {"H": 20, "optimizer": {"name": "sgd", "lr": 0.05}, "max_norm": 1.0,
          "lr_schedule": {"name": "cosine"}}})");
  m["runs"] = json::parse(R"([
    {"name": "ddp", "strategy": {"plugin": "allreduce", "options": {"max_norm": 2.0}}},
    {"name": "longer", "strategy": {"options": {"H": 50}}}])");
  const ManifestSet set = parse(m, {"strategy.options.lr_schedule={\"name\": \"linear\"}"});
  const Manifest& ddp = set.runs[0];
  CHECK(ddp.strategy.options == json::parse(R"({"max_norm": 2.0, "lr_schedule": {"name": "linear"}})"));
  CHECK(ddp.strategy.base_plugin == "diloco");
  // What the variant (or --set) sets itself is not left behind.
  CHECK(ddp.strategy.base_options == json::parse(R"({"H": 20, "optimizer": {"name": "sgd", "lr": 0.05}})"));
  auto& loader = exogym::test::test_loader();
  // H is diloco's alone: not worth a word.
  CHECK(exogym::runtime::train::check_run(ddp, loader) ==
        std::vector<std::string>{
            "strategy.options: variant \"ddp\" switches strategy.plugin from \"diloco\" to \"allreduce\", so it "
            "does not inherit the base's strategy.options; \"allreduce\" declares these too and they take its "
            "defaults: optimizer (set them in the variant to keep the base's values)"});
  CHECK(set.runs[1].strategy.base_plugin.empty());
  CHECK(exogym::runtime::train::check_run(set.runs[1], loader).empty());
}

TEST_CASE("a --set that switches plugin is warned of the manifest's options the new plugin declares too",
          "[manifest]") {
  json m = minimal();
  m["strategy"] =
      json::parse(R"({"plugin": "diloco", "options": {"H": 20, "optimizer": {"name": "sgd", "lr": 0.05}}})");
  auto& loader = exogym::test::test_loader();
  const Manifest one = parse(m, {"strategy.plugin=allreduce"}).runs[0];
  CHECK(one.strategy.base_plugin == "diloco");
  CHECK(exogym::runtime::train::check_run(one, loader) ==
        std::vector<std::string>{
            "strategy.options: --set strategy.plugin=allreduce switches strategy.plugin from \"diloco\" to "
            "\"allreduce\", so it does not inherit the manifest's strategy.options; \"allreduce\" declares these too "
            "and they take its defaults: optimizer (set them with --set strategy.options.<name>=... to keep the "
            "manifest's values)"});
  // Setting the option too leaves nothing behind worth a word; and a --set
  // that keeps the plugin switches nothing.
  CHECK(exogym::runtime::train::check_run(
            parse(m, {"strategy.plugin=allreduce", "strategy.options.optimizer=adamw"}).runs[0], loader)
            .empty());
  CHECK(parse(m, {"strategy.options.H=5"}).runs[0].strategy.base_plugin.empty());
  // In a comparison, over every variant it switches.
  m["runs"] = json::parse(R"([{"name": "a"}, {"name": "b", "strategy": {"plugin": "fedavg", "options": {"H": 5}}}])");
  for (const Manifest& run : parse(m, {"strategy.plugin=allreduce"}).runs) {
    INFO(run.variant);
    CHECK(run.strategy.switched_by == "--set strategy.plugin=allreduce");
  }
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
  CHECK_THAT(with_runs(R"([{"nodse": 2}])").what,
             Catch::StartsWith("runs[0].nodse: unknown option; did you mean \"nodes\"?"));
  CHECK_THAT(with_runs(R"([{"model": null}])").what, Catch::StartsWith("runs[0].model: required option missing"));
  CHECK(with_runs(R"([{"name": "a b"}])").what ==
        "runs[0].name: expected a folder name (letters, digits, '-', '_' and '.'; at most 200 of them), got \"a b\"");
  // The comparison's own files beside the variants' folders.
  for (const char* reserved : {"comparison.csv", "comparison.txt", "report.html", "variants.json"}) {
    CHECK(with_runs((R"([{"name": ")" + std::string(reserved) + R"("}])").c_str()).what ==
          "runs[0].name: \"" + std::string(reserved) +
              "\" is reserved: the comparison writes a file of that name beside the variants' folders");
  }
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
  CHECK(base_fault.what ==
        "strategy: required option missing (an object: the strategy plugin and its options) (in variant \"run1\")");

  // A base that lacks what every variant supplies is fine.
  no_strategy["runs"][1]["strategy"] = {{"plugin", "diloco"}};
  CHECK(parse(no_strategy).runs.size() == 2);
}

TEST_CASE("overrides (--set) refuse numbers beyond a double and deep nesting, naming the column", "[manifest]") {
  json doc = json::object();
  CHECK_THROWS_WITH(apply_override(doc, "strategy.options.lr=1e400"),
                    "--set: \"strategy.options.lr=1e400\", column 21: the number 1e400 is beyond the range of a double "
                    "(about 1.8e308)");
  CHECK_THROWS_WITH(apply_override(doc, "x=" + std::string(100, '[')),
                    Catch::Contains("column 67: nested deeper than 64 levels"));
  // A value that is not JSON stays a string, whatever digits it holds.
  apply_override(doc, "output.dir=runs/1e400");
  CHECK(doc["output"]["dir"] == "runs/1e400");
}
