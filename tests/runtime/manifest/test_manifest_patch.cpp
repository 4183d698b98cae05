// How a variant, --set and a resumed run's --set patch a manifest: named
// objects (an optimizer, a schedule, a partition) replace, unnamed ones
// refine, and another plugin or dataset does not inherit the options of the
// one it replaces (manifest/patch.h).
#include <fstream>

#include "exogym/runtime/command/resume.h"
#include "exogym/runtime/manifest/overrides.h"
#include "exogym/runtime/manifest/patch.h"
#include "exogym/runtime/train/training.h"
#include "helpers.h"
#include "manifest_fixtures.h"
#include "testing.h"

using exogym::runtime::manifest::apply_override;
using exogym::runtime::manifest::apply_patch;
using nlohmann::json;
using Kind = exogym::runtime::data::PartitionSpec::Kind;
// The fixtures: minimal(), parse(), parse_one(), config_error(), error_with().
using namespace exogym::test::manifest;

namespace {

json dirichlet_base() {
  json m = minimal();
  m["nodes"] = 4;
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.05}};
  return m;
}

json with_variant(json base, const json& variant) {
  base["runs"] = json::array({variant});
  return base;
}

const json kShards = {{"name", "shards"}, {"shards_per_node", 2}};

json partition_patch(const json& partition) { return {{"data", {{"train", {{"partition", partition}}}}}}; }

}  // namespace

TEST_CASE("apply_patch: named objects replace, unnamed ones refine, null removes, lists replace", "[manifest]") {
  json doc = json::parse(R"({
    "name": "run",
    "strategy": {"plugin": "diloco", "options": {"H": 20, "hidden": [1, 2],
      "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.1},
      "outer_optimizer": "sgd", "lr_schedule": {"name": "cosine", "warmup_steps": 10}}}})");
  apply_patch(doc, json::parse(R"({"strategy": {"options": {"H": null, "hidden": [3],
      "optimizer": {"name": "sgd", "momentum": 0.9, "nesterov": null},
      "outer_optimizer": {"lr": 0.5}, "lr_schedule": {"warmup_steps": 5}}}})"));
  CHECK(doc == json::parse(R"({
    "name": "run",
    "strategy": {"plugin": "diloco", "options": {"hidden": [3],
      "optimizer": {"name": "sgd", "momentum": 0.9},
      "outer_optimizer": {"name": "sgd", "lr": 0.5}, "lr_schedule": {"name": "cosine", "warmup_steps": 5}}}})"));

  // The document itself is refined, though its "name" names the run.
  apply_patch(doc, {{"name", "other"}});
  CHECK(doc["name"] == "other");
  CHECK(doc["strategy"]["plugin"] == "diloco");

  // Another plugin or dataset: its siblings are refined, "options" dropped.
  json data = json::parse(R"({"train": {"dataset": "synthetic", "path": "p", "options": {"classes": 3}}})");
  apply_patch(data, {{"train", {{"dataset", "mnist"}}}});
  CHECK(data == json::parse(R"({"train": {"dataset": "mnist", "path": "p"}})"));
  json same = json::parse(R"({"model": {"plugin": "mlp", "options": {"a": 1}}})");
  apply_patch(same, json::parse(R"({"model": {"plugin": "mlp", "options": {"b": 2}}})"));
  CHECK(same == json::parse(R"({"model": {"plugin": "mlp", "options": {"a": 1, "b": 2}}})"));
}

TEST_CASE("a variant that names another partition replaces the base's", "[manifest]") {
  const ManifestSet set = parse(with_variant(dirichlet_base(), partition_patch(kShards)));
  const Manifest& run = set.runs.front();
  CHECK(run.train_data.partition.kind == Kind::Shards);
  CHECK(run.train_data.partition.shards_per_node == 2);
  CHECK(run.resolved["data"]["train"]["partition"] == kShards);
}

TEST_CASE("a variant's partition without a name refines the base's", "[manifest]") {
  const ManifestSet set = parse(with_variant(dirichlet_base(), partition_patch({{"alpha", 0.5}})));
  const Manifest& run = set.runs.front();
  CHECK(run.train_data.partition.kind == Kind::Dirichlet);
  CHECK(run.train_data.partition.alpha == 0.5);
  // A partition given by name alone is refined like {"name": ...}.
  json iid = with_variant(minimal(), partition_patch({{"name", "contiguous"}}));
  CHECK(parse(iid).runs.front().train_data.partition.kind == Kind::Contiguous);
}

TEST_CASE("overrides (--set) of a named partition replace it, in a plain manifest and in every variant", "[manifest]") {
  const std::string set_shards = "data.train.partition=" + kShards.dump();
  CHECK(parse_one(dirichlet_base(), {set_shards}).resolved["data"]["train"]["partition"] == kShards);
  json variants = with_variant(dirichlet_base(), partition_patch({{"alpha", 0.5}}));
  CHECK(parse(variants, {set_shards}).runs.front().resolved["data"]["train"]["partition"] == kShards);
  // Unnamed, it refines.
  CHECK(parse_one(dirichlet_base(), {"data.train.partition.alpha=0.5"}).train_data.partition.alpha == 0.5);
  CHECK(parse_one(dirichlet_base(), {"data.train.partition={\"alpha\": 0.5}"}).train_data.partition.alpha == 0.5);
}

TEST_CASE("an override (--set) of a partition's name alone starts a new partition of that kind", "[manifest]") {
  // The name replaces the object: alpha does not follow it into "shards",
  // and what "shards" needs is asked for at its path.
  const auto missing = config_error([] { parse(dirichlet_base(), {"data.train.partition.name=shards"}); });
  CHECK(missing.path == "data.train.partition.shards_per_node");
  CHECK_THAT(missing.what, Catch::StartsWith("data.train.partition.shards_per_node: required option missing"));
  // Its keys set after the name refine the new object.
  const Manifest run =
      parse_one(dirichlet_base(), {"data.train.partition.name=shards", "data.train.partition.shards_per_node=2"});
  CHECK(run.resolved["data"]["train"]["partition"] == kShards);
}

TEST_CASE("a named optimizer replaces, an unnamed one refines, in variants and --set", "[manifest]") {
  json base = minimal();
  base["strategy"] = json::parse(
      R"({"plugin": "diloco", "options": {"optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.1},
          "outer_optimizer": "sgd"}})");
  base["runs"] = json::parse(R"([
    {"name": "sgd", "strategy": {"options": {"optimizer": {"name": "sgd", "lr": 0.05}}}},
    {"name": "slower", "strategy": {"options": {"optimizer": {"lr": 0.001}, "outer_optimizer": {"lr": 0.5}}}}])");
  const ManifestSet set = parse(base);
  CHECK(set.runs[0].strategy.options["optimizer"] == json::parse(R"({"name": "sgd", "lr": 0.05})"));
  CHECK(set.runs[1].strategy.options["optimizer"] ==
        json::parse(R"({"name": "adamw", "lr": 0.001, "weight_decay": 0.1})"));
  // "sgd" alone is refined as {"name": "sgd"}: the name is kept.
  CHECK(set.runs[1].strategy.options["outer_optimizer"] == json::parse(R"({"name": "sgd", "lr": 0.5})"));

  base.erase("runs");
  const Manifest sgd = parse_one(base, {"strategy.options.optimizer.name=sgd"});
  CHECK(sgd.strategy.options["optimizer"] == json({{"name", "sgd"}}));
  const Manifest outer = parse_one(base, {"strategy.options.outer_optimizer.lr=0.5"});
  CHECK(outer.strategy.options["outer_optimizer"] == json::parse(R"({"name": "sgd", "lr": 0.5})"));
}

TEST_CASE("overrides (--set) of another plugin or dataset do not keep the options of the one it replaces",
          "[manifest]") {
  json base = minimal();
  base["strategy"] = json::parse(R"({"plugin": "diloco", "options": {"H": 20}})");
  base["data"]["train"] = json::parse(R"({"dataset": "synthetic", "options": {"classes": 3}})");
  const Manifest run = parse_one(base, {"strategy.plugin=allreduce", "data.train.dataset=mnist"});
  CHECK(run.strategy.plugin == "allreduce");
  CHECK(run.strategy.options == json::object());
  CHECK(run.train_data.dataset == "mnist");
  CHECK(run.train_data.options == json::object());
  // The same plugin keeps them, and what --set adds to them.
  const Manifest same = parse_one(base, {"strategy.plugin=diloco", "strategy.options.outer_optimizer=sgd"});
  CHECK(same.strategy.options == json({{"H", 20}, {"outer_optimizer", "sgd"}}));
  // A variant switching dataset leaves the base's options behind too.
  json variant = with_variant(base, {{"data", {{"train", {{"dataset", "mnist"}}}}}});
  CHECK(parse(variant).runs.front().train_data.options == json::object());
}

TEST_CASE("a wrong key in a named or unnamed patch is an error at its JSON path", "[manifest]") {
  const auto in_variant = config_error([] {
    parse(with_variant(dirichlet_base(), partition_patch({{"name", "shards"}, {"shards", 2}})));
  });
  CHECK(in_variant.path == "runs[0].data.train.partition.shards");
  CHECK_THAT(
      in_variant.what,
      Catch::StartsWith("runs[0].data.train.partition.shards: unknown option; did you mean \"shards_per_node\"?"));
  const auto refined = config_error([] { parse(with_variant(dirichlet_base(), partition_patch({{"alpah", 1}}))); });
  CHECK(refined.path == "runs[0].data.train.partition.alpah");
  // What a variant's named object leaves out is the variant's to give.
  const auto missing = config_error([] {
    parse(with_variant(dirichlet_base(), partition_patch({{"name", "shards"}})));
  });
  CHECK_THAT(missing.what, Catch::StartsWith("runs[0].data.train.partition.shards_per_node: required option missing"));
  const auto set = config_error([] { parse(dirichlet_base(), {"data.train.partition.alpah=1"}); });
  CHECK_THAT(set.what, Catch::StartsWith("data.train.partition.alpah: unknown option; did you mean \"alpha\"?"));
}

TEST_CASE("overrides (--set) on a resumed run replace a named object of its recorded manifest", "[manifest]") {
  exogym::test::TempDir dir("resume-patch");
  const Manifest recorded = parse_one(dirichlet_base());
  std::ofstream(dir / "config.json") << recorded.resolved.dump();
  const auto set = exogym::runtime::command::resumed_manifest(dir.path(), {"data.train.partition=" + kShards.dump()});
  CHECK(set.runs.front().resolved["data"]["train"]["partition"] == kShards);
}

TEST_CASE("every example manifest loads, and its plugins accept every variant's options", "[manifest]") {
  int runs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(EXOGYM_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "manifest.schema.json") continue;
    INFO(entry.path().string());
    const ManifestSet set = exogym::runtime::manifest::load_manifest(entry.path());
    for (const auto& run : set.runs) {
      INFO(run.variant);
      CHECK_NOTHROW(exogym::runtime::train::check_run(run, exogym::test::test_loader()));
      ++runs;
    }
  }
  CHECK(runs >= 30);
}
