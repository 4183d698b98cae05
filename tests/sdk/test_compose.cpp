// Composition's rules about options (sdk/compose.h): every option of a
// composed strategy has one owner. Two parts declaring one name is an error
// at plugin load naming both; a module reads only what it declares, and the
// built-in modules do.
#include <filesystem>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "exogym/modules/aggregation/sparta.h"
#include "exogym/modules/outer/diloco.h"
#include "exogym/modules/outer/fedavg.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
namespace sdk = exogym::sdk;
using nlohmann::json;

namespace {

const fs::path kTestPlugins = EXOGYM_TEST_PLUGIN_DIR;

sdk::OptionSpec integer(const std::string& name) {
  return sdk::OptionSpec{name, sdk::OptionType::PositiveInteger, 1, "a test option"};
}

std::vector<std::string> names(const sdk::OptionSpecs& specs) {
  std::vector<std::string> result;
  for (const auto& spec : specs) result.push_back(spec.name);
  return result;
}

// A module that reads "alpha", which it does not declare: the bug the
// options view exists to catch, even where another part declares "alpha".
class Greedy final : public sdk::CommunicationModule {
 public:
  static sdk::ModuleSpecs specs() { return {"Greedy", {integer("k")}}; }
  explicit Greedy(const sdk::ModuleOptions& options)
      : k_(options.at("k").get<int64_t>()), alpha_(options.at("alpha").get<int64_t>()) {}
  void communicate(sdk::NodeContext& /*ctx*/, sdk::Model& /*model*/, int64_t /*step*/) override {}

 private:
  int64_t k_, alpha_;
};

class Alpha final : public sdk::CommunicationModule {
 public:
  static sdk::ModuleSpecs specs() { return {"Alpha", {integer("alpha")}}; }
  explicit Alpha(const sdk::ModuleOptions& options) : alpha_(options.at("alpha").get<int64_t>()) {}
  void communicate(sdk::NodeContext& /*ctx*/, sdk::Model& /*model*/, int64_t /*step*/) override {}
  int64_t alpha() const { return alpha_; }

 private:
  int64_t alpha_;
};

// Module built from the options validated against its own specs alone: it
// throws InternalError if it reads any option it does not declare.
template <class Module>
void built_from_its_own_options() {
  const sdk::ModuleSpecs own = Module::specs();
  INFO(own.module);
  const json options = sdk::validate_options(json::object(), own.specs, "strategy.options");
  CHECK_NOTHROW(Module(sdk::ModuleOptions(options, own)));
}

}  // namespace

TEST_CASE("compose_specs keeps every part's options in order and refuses a name declared twice", "[sdk][compose]") {
  CHECK(names(sdk::compose_specs({{"A", {integer("x"), integer("y")}}, {"B", {integer("z")}}})) ==
        std::vector<std::string>{"x", "y", "z"});
  CHECK_THROWS_AS(sdk::compose_specs({{"A", {integer("H")}}, {"B", {integer("H")}}}), sdk::PluginError);
  CHECK_THROWS_WITH(sdk::compose_specs({{"A", {integer("x"), integer("H")}}, {"B", {integer("H")}}}),
                    "option \"H\" is declared by both A and B");
  CHECK_THROWS_WITH(sdk::compose_specs({{"A", {integer("H"), integer("H")}}}), "option \"H\" is declared twice by A");
  // The local step is a part too.
  CHECK_THROWS_WITH(sdk::compose_specs({{"Mine", {integer("max_norm")}}, sdk::LocalStepOptions::specs()}),
                    "option \"max_norm\" is declared by both Mine and LocalStepOptions");
}

TEST_CASE("a module sees only the options it declares, and reading another is an internal error naming both",
          "[sdk][compose]") {
  const sdk::OptionSpecs all = sdk::compose_specs({Alpha::specs(), Greedy::specs()});
  const json options = sdk::validate_options({{"alpha", 3}, {"k", 5}}, all, "strategy.options");
  const sdk::ModuleOptions alpha(options, Alpha::specs());
  CHECK(alpha.module() == "Alpha");
  CHECK(alpha.at("alpha") == 3);
  CHECK_THROWS_AS(alpha.at("k"), sdk::InternalError);
  // "alpha" is in the strategy's options (Alpha declares it), yet not Greedy's.
  CHECK_THROWS_WITH(Greedy(sdk::ModuleOptions(options, Greedy::specs())),
                    Catch::Contains("Greedy reads the option \"alpha\", which its specs() do not declare"));
  // So through a composed strategy, whatever the other modules declare.
  CHECK_THROWS_AS((sdk::ComposedStrategy<Alpha, Greedy>(
                      sdk::validate_options(json::object(), sdk::ComposedStrategy<Alpha, Greedy>::specs(), "o"))),
                  sdk::InternalError);
  // Options that were not validated against the module's specs are a bug too.
  CHECK_THROWS_WITH(sdk::ModuleOptions(json{{"k", 5}}, Alpha::specs()),
                    Catch::Contains("Alpha's option \"alpha\" is not in the options it is given"));
}

TEST_CASE("every built-in module reads only the options it declares", "[sdk][compose][strategies]") {
  built_from_its_own_options<exogym::modules::SpartaModule>();
  built_from_its_own_options<exogym::modules::DiLoCoModule>();
  built_from_its_own_options<exogym::modules::FedAvgModule>();
  const json local = sdk::validate_options(json::object(), sdk::LocalStepOptions::specs().specs, "strategy.options");
  CHECK(sdk::LocalStepOptions::from_json(local).optimizer.name == "adamw");
  // SPARTA's interval is SpartaModule's own option, so plain "sparta" takes it too.
  auto sparta = exogym::test::test_loader().load("strategy", "sparta", "strategy.plugin");
  CHECK(sparta->validate(json::object(), "strategy.options").at("sparta_interval") == 1);
}

TEST_CASE("a strategy whose modules both declare an option is refused at load, naming both modules",
          "[loader][compose]") {
  const fs::path file = kTestPlugins / "exogym_strategy_duplicate_option.so";
  const std::string message = "option \"H\" is declared by both DiLoCoModule and FedAvgModule";
  exogym::runtime::plugin::PluginLoader loader({kTestPlugins});
  CHECK_THROWS_AS(loader.load_file(file), sdk::PluginError);
  CHECK_THROWS_WITH(loader.load_file(file),
                    Catch::StartsWith(file.string() + ": exogym_plugin_options failed: ") && Catch::EndsWith(message));
  // From a manifest, as a user meets it: exit 2, naming the field and the file.
  exogym::test::TempDir dir("duplicate-option");
  auto manifest = exogym::test::small_manifest(2);
  manifest["strategy"] = {{"plugin", "duplicate_option"}};
  const auto run = exogym::test::run_cli(
      {"--plugin-path", kTestPlugins.string(), exogym::test::write_manifest(dir, "m", manifest).string()},
      dir / "log.txt", 60);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Catch::Contains("strategy.plugin: " + file.string()) && Catch::Contains(message));
}
