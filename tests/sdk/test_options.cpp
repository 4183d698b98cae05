// Declaring and validating options (sdk/options.h): the one vocabulary that
// checks plugin options and the manifest alike.
#include <limits>
#include <string>

#include "exogym/sdk/error.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::closest_name;
using exogym::sdk::ConfigError;
using exogym::sdk::OptimizerSpec;
using exogym::sdk::OptionSpec;
using exogym::sdk::OptionSpecs;
using exogym::sdk::OptionType;
using exogym::test::config_error;
using exogym::test::kDilocoOuter;
using nlohmann::json;

namespace {

OptionSpecs strategy_specs() {
  return {
      {"H", OptionType::PositiveInteger, 100, "steps between syncs"},
      {"p_sparta", OptionType::Fraction, 0.005, "fraction exchanged"},
      {"max_norm", OptionType::PositiveNumber, nullptr, "clipping"},
      {"optimizer", OptionType::Optimizer, "adamw", "inner optimizer"},
      {"outer_optimizer", OptionType::Optimizer, kDilocoOuter, "outer optimizer"},
      {"lr_schedule", OptionType::LrSchedule, nullptr, "schedule"},
      {"hidden", OptionType::IntegerList, json::array({256}), "widths"},
      {"activation", OptionType::String, "relu", "nonlinearity", {"relu", "gelu", "tanh"}},
      {"shuffle", OptionType::Boolean, false, "shuffle"},
      {"offset", OptionType::Integer, 0, "any integer"},
      {"warmup", OptionType::NonNegativeInteger, 0, "steps"},
      {"extra", OptionType::Object, json::object(), "free-form"},
  };
}

}  // namespace

TEST_CASE("validate_options fills every default", "[sdk][options]") {
  const json resolved = exogym::sdk::validate_options(nullptr, strategy_specs(), "strategy.options");
  CHECK(resolved.size() == 12);
  CHECK(resolved["H"] == 100);
  CHECK(resolved["p_sparta"] == 0.005);
  CHECK(resolved["max_norm"].is_null());
  CHECK(resolved["hidden"] == json::array({256}));
  CHECK(resolved["activation"] == "relu");
  CHECK(resolved["shuffle"] == false);
  CHECK(resolved["extra"] == json::object());
  // Optimizers are written out in full, the declared default included.
  CHECK(resolved["optimizer"] == json({{"name", "adamw"},
                                       {"lr", 1e-3},
                                       {"betas", {0.9, 0.999}},
                                       {"eps", 1e-8},
                                       {"weight_decay", 0.01},
                                       {"amsgrad", false}}));
  CHECK(resolved["outer_optimizer"] == json({{"name", "sgd"},
                                             {"lr", 0.7},
                                             {"momentum", 0.9},
                                             {"dampening", 0.0},
                                             {"weight_decay", 0.0},
                                             {"nesterov", true}}));
  // An unset schedule resolves to the constant one, written out.
  CHECK(resolved["lr_schedule"] ==
        json({{"name", "constant"}, {"warmup_steps", 0}, {"min_factor", 1.0}, {"max_steps", 0}}));

  // Given values win; 20.0 is an integer; explicit null means "use the default".
  const json given = {{"H", 20.0}, {"offset", -5}, {"hidden", {128, 64}}, {"p_sparta", 1}, {"warmup", nullptr}};
  const json mixed = exogym::sdk::validate_options(given, strategy_specs(), "strategy.options");
  CHECK(mixed["H"] == 20);
  CHECK(mixed["H"].is_number_integer());
  CHECK(mixed["offset"] == -5);
  CHECK(mixed["hidden"] == json::array({128, 64}));
  CHECK(mixed["p_sparta"] == 1);
  CHECK(mixed["warmup"] == 0);
}

TEST_CASE("validate_options rejects unknown options with a suggestion", "[sdk][options]") {
  auto error = config_error([] { exogym::sdk::validate_options({{"p", 0.05}}, strategy_specs(), "strategy.options"); });
  CHECK(error.path() == "strategy.options.p");
  CHECK_THAT(error.what(), Catch::StartsWith("strategy.options.p: unknown option; did you mean \"p_sparta\"? "
                                             "known options: H, p_sparta, max_norm, optimizer"));

  error = config_error([] { exogym::sdk::validate_options({{"optimzer", "sgd"}}, strategy_specs(), "s"); });
  CHECK_THAT(error.what(), Catch::Contains("did you mean \"optimizer\"?"));

  error = config_error([] { exogym::sdk::validate_options({{"h", 3}}, strategy_specs(), "s"); });
  CHECK_THAT(error.what(), Catch::Contains("did you mean \"H\"?"));

  // Nothing close: no suggestion, but the list.
  error = config_error([] { exogym::sdk::validate_options({{"zzzz", 1}}, strategy_specs(), "s"); });
  CHECK(std::string(error.what()).find("did you mean") == std::string::npos);
  CHECK_THAT(error.what(), Catch::StartsWith("s.zzzz: unknown option; known options: H, "));

  CHECK(exogym::sdk::closest_name("lrr", {"lr", "eps"}) == "lr");
  CHECK(exogym::sdk::closest_name("rl", {"H", "lr"}) == "lr");  // a swap is one edit
  CHECK(exogym::sdk::closest_name("Warmup_Step", {"warmup_steps"}) == "warmup_steps");
  CHECK(exogym::sdk::closest_name("warmup", {"name", "warmup_steps"}) == "warmup_steps");
  CHECK(exogym::sdk::closest_name("x", {"H", "lr"}).empty());
}

TEST_CASE("closest_name suggests near misses only", "[sdk][options]") {
  const std::vector<std::string> keys = {"name", "nodes", "seed", "max_steps", "lr"};
  CHECK(closest_name("nodse", keys) == "nodes");  // a swap costs 1
  CHECK(closest_name("max_step", keys) == "max_steps");
  CHECK(closest_name("Nodes", keys) == "nodes");
  CHECK(closest_name("maxsteps", keys) == "max_steps");
  CHECK(closest_name("zzzzz", keys).empty());
  CHECK(closest_name("x", keys).empty());                    // 2 edits away from "lr", but nothing in common
  CHECK(closest_name("nods", {"node", "nodes"}) == "node");  // ties go to the first
  CHECK(closest_name("anything", {}).empty());
}

TEST_CASE("validate_options names the path and the offending value on type errors", "[sdk][options]") {
  auto check = [](const json& given, const std::string& expected) {
    auto error = config_error([&] { exogym::sdk::validate_options(given, strategy_specs(), "strategy.options"); });
    CHECK(std::string(error.what()) == expected);
  };
  check({{"H", -3}}, "strategy.options.H: expected a positive integer, got -3");
  check({{"H", 0}}, "strategy.options.H: expected a positive integer, got 0");
  check({{"H", 2.5}}, "strategy.options.H: expected a positive integer, got 2.5");
  check({{"H", "20"}}, "strategy.options.H: expected a positive integer, got \"20\"");
  check({{"offset", true}}, "strategy.options.offset: expected an integer, got true");
  check({{"warmup", -1}}, "strategy.options.warmup: expected a non-negative integer, got -1");
  check({{"p_sparta", 0}}, "strategy.options.p_sparta: expected a fraction in (0, 1], got 0");
  check({{"p_sparta", 1.5}}, "strategy.options.p_sparta: expected a fraction in (0, 1], got 1.5");
  check({{"max_norm", -1.0}}, "strategy.options.max_norm: expected a positive number, got -1.0");
  check({{"shuffle", 1}}, "strategy.options.shuffle: expected a boolean, got 1");
  check({{"hidden", 256}}, "strategy.options.hidden: expected a list of positive integers, got 256");
  check({{"hidden", {256, 0}}}, "strategy.options.hidden[1]: expected a positive integer, got 0");
  check({{"extra", {1, 2}}}, "strategy.options.extra: expected an object, got [1,2]");
  check({{"activation", "swish"}},
        "strategy.options.activation: expected one of \"relu\", \"gelu\", \"tanh\", got \"swish\"");
  check({{"activation", "rellu"}},
        "strategy.options.activation: expected one of \"relu\", \"gelu\", \"tanh\", got \"rellu\"; "
        "did you mean \"relu\"?");
  // Nested optimizer and schedule errors carry the full path.
  check({{"optimizer", {{"lr", -1}}}}, "strategy.options.optimizer.lr: expected a positive number, got -1");
  // Would fail at the first step, converted to the parameters' float.
  check({{"optimizer", {{"lr", 1e308}}}},
        "strategy.options.optimizer.lr: beyond a float's range (about 3.4e38), which the parameters' type cannot "
        "hold, got 1e+308");
  check({{"lr_schedule", {{"warmup_steps", -2}}}},
        "strategy.options.lr_schedule.warmup_steps: expected a non-negative integer, got -2");

  // The options themselves must be an object (or null).
  auto error = config_error([] { exogym::sdk::validate_options(json::array(), strategy_specs(), "model.options"); });
  CHECK(error.path() == "model.options");
}

TEST_CASE("validate_options reports a missing required option", "[sdk][options]") {
  const OptionSpecs specs = {{"path", OptionType::String, nullptr, "where the data is", {}, true},
                             {"size", OptionType::PositiveInteger, 3, "size"}};
  auto error = config_error([&] { exogym::sdk::validate_options({{"size", 4}}, specs, "data.train.options"); });
  CHECK(error.path() == "data.train.options.path");
  CHECK_THAT(error.what(), Catch::Contains("required option missing"));
  // Explicit null does not satisfy a required option.
  CHECK_THROWS_AS(exogym::sdk::validate_options({{"path", nullptr}}, specs, "d"), ConfigError);
  CHECK(exogym::sdk::validate_options({{"path", "x"}}, specs, "d") == json({{"path", "x"}, {"size", 3}}));
}

TEST_CASE("validate_options resolves sections and tables with the same rules", "[sdk][options]") {
  const OptionSpec entry{"<node>", OptionType::PositiveNumber, nullptr, "speed"};
  OptionSpec table{"speed", OptionType::Table, nullptr, "per-node speeds"};
  table.fields = {entry};
  OptionSpec section{"train", OptionType::Section, json::object(), "the loop"};
  section.fields = {
      {"steps", OptionType::PositiveInteger, 10, "steps"}, {"target", OptionType::Number, nullptr, "optional"}, table};
  const OptionSpecs specs = {section};

  // An absent section with an object default is filled in, unset keys null.
  CHECK(exogym::sdk::validate_options(nullptr, specs, "") ==
        json::parse(R"({"train": {"steps": 10, "target": null, "speed": null}})"));
  const json given = json::parse(R"({"train": {"steps": 2.0, "speed": {"3": 0.5}}})");
  CHECK(exogym::sdk::validate_options(given, specs, "") ==
        json::parse(R"({"train": {"steps": 2, "target": null, "speed": {"3": 0.5}}})"));
  // Unset::Omit leaves unset keys out, at every depth.
  CHECK(exogym::sdk::validate_options(given, specs, "", exogym::sdk::Unset::Omit) ==
        json::parse(R"({"train": {"steps": 2, "speed": {"3": 0.5}}})"));

  auto what = [&](const char* text) {
    return std::string(config_error([&] { exogym::sdk::validate_options(json::parse(text), specs, "m"); }).what());
  };
  CHECK(what(R"({"train": {"step": 1}})") ==
        "m.train.step: unknown option; did you mean \"steps\"? known options: steps, target, speed");
  CHECK(what(R"({"train": {"steps": 0}})") == "m.train.steps: expected a positive integer, got 0");
  CHECK(what(R"({"train": []})") == "m.train: expected an object, got []");
  CHECK(what(R"({"train": {"speed": {"3": -1}}})") == "m.train.speed.3: expected a positive number, got -1");
  CHECK(what(R"({"train": {"speed": [1]}})") == "m.train.speed: expected a table, got [1]");

  // A required section must be given.
  OptionSpec needed = section;
  needed.required = true;
  CHECK(std::string(config_error([&] { exogym::sdk::validate_options(json::object(), {needed}, ""); }).what()) ==
        "train: required option missing (an object: the loop)");
}

TEST_CASE("validate_options: lists follow their item spec, tagged values name their kind", "[sdk][options]") {
  OptionSpec list{"labels", OptionType::List, nullptr, "labels"};
  list.fields = {{"<item>", OptionType::NonNegativeInteger, nullptr, "a label"}};
  OptionSpec kinds{"partition", OptionType::Tagged, "plain", "how"};
  kinds.fields = {{"plain", OptionType::Section, nullptr, "no keys"}, {"skewed", OptionType::Section, nullptr, "skew"}};
  kinds.fields[1].fields = {{"alpha", OptionType::PositiveNumber, nullptr, "the concentration", {}, true},
                            {"floor", OptionType::Number, 0, "a key with a default"}};
  const OptionSpecs specs = {list, kinds};
  const auto resolve = [&](const char* text) { return exogym::sdk::validate_options(json::parse(text), specs, "m"); };
  auto what = [&](const char* text) { return std::string(config_error([&] { resolve(text); }).what()); };

  CHECK(resolve("{}") == json::parse(R"({"labels": null, "partition": "plain"})"));
  CHECK(resolve(R"({"labels": [0, 3.0]})")["labels"] == json::parse("[0, 3]"));
  CHECK(what(R"({"labels": [0, -1]})") == "m.labels[1]: expected a non-negative integer, got -1");
  CHECK(what(R"({"labels": 3})") == "m.labels: expected a list, got 3");
  // A name stays a name; an object is resolved like a section, defaults filled in.
  CHECK(resolve(R"({"partition": "plain"})")["partition"] == "plain");
  CHECK(resolve(R"({"partition": {"name": "skewed", "alpha": 0.5}})")["partition"] ==
        json::parse(R"({"name": "skewed", "alpha": 0.5, "floor": 0})"));
  CHECK(what(R"({"partition": "skewd"})") ==
        "m.partition: expected one of \"plain\", \"skewed\", got \"skewd\"; did you mean \"skewed\"?");
  CHECK(what(R"({"partition": "skewed"})") ==
        "m.partition: \"skewed\" needs \"alpha\" (the concentration): write {\"name\": \"skewed\", \"alpha\": ...}");
  CHECK(what(R"({"partition": {"alpha": 1}})") ==
        "m.partition.name: required option missing (a name, or object with a \"name\")");
  CHECK(what(R"({"partition": {"name": "skewed", "alpha": 0}})") ==
        "m.partition.alpha: expected a positive number, got 0");
  CHECK(what(R"({"partition": {"name": "skewed", "alpha": 1, "beta": 2}})") ==
        "m.partition.beta: unknown option; known options: name, alpha, floor");
  CHECK(what(R"({"partition": 3})") == "m.partition: expected a name, or object with a \"name\", got 3");
}

TEST_CASE("validate_options: integer maximum, nouns and non-empty strings", "[sdk][options]") {
  OptionSpec count{"nodes", OptionType::PositiveInteger, 1, "nodes"};
  count.maximum = 2147483647;
  OptionSpec seed{"seed", OptionType::NonNegativeInteger, 0, "seed"};
  seed.maximum = std::numeric_limits<uint64_t>::max();
  OptionSpec rate{"bandwidth", OptionType::String, "1Gbit/s", "link"};
  rate.noun = "bandwidth with a unit such as \"1Gbit/s\"";
  const OptionSpecs specs = {count, seed, rate, {"path", OptionType::NonEmptyString, nullptr, "where"}};
  auto what = [&](const json& given) {
    return std::string(config_error([&] { exogym::sdk::validate_options(given, specs, "m"); }).what());
  };
  CHECK(what({{"nodes", 3e9}}) == "m.nodes: expected a positive integer no larger than 2147483647, got 3000000000.0");
  CHECK(what({{"nodes", 0}}) == "m.nodes: expected a positive integer, got 0");
  CHECK(what({{"bandwidth", 1000}}) == "m.bandwidth: expected a bandwidth with a unit such as \"1Gbit/s\", got 1000");
  CHECK(what({{"path", ""}}) == "m.path: expected a non-empty string, got \"\"");
  CHECK(what({{"path", 3}}) == "m.path: expected a non-empty string, got 3");

  // Seeds span 64 bits; other integers stop at INT64_MAX, where int64_t does.
  const json resolved =
      exogym::sdk::validate_options({{"seed", 18446744073709551615ULL}, {"nodes", 2147483647}}, specs, "m");
  CHECK(resolved["seed"].get<uint64_t>() == 18446744073709551615ULL);
  CHECK(resolved["nodes"] == 2147483647);
  CHECK(what({{"nodes", 18446744073709551615ULL}}) ==
        "m.nodes: expected a positive integer no larger than 2147483647, got 18446744073709551615");
  const OptionSpecs plain = {{"offset", OptionType::Integer, 0, "any integer"}};
  CHECK(std::string(config_error([&] {
                      exogym::sdk::validate_options({{"offset", 9223372036854775808ULL}}, plain, "m");
                    }).what()) ==
        "m.offset: expected an integer no larger than 9223372036854775807, got 9223372036854775808");
  CHECK(exogym::sdk::validate_options({{"offset", -9223372036854775807LL}}, plain, "m")["offset"] ==
        -9223372036854775807LL);
}

TEST_CASE("describe_options and to_string", "[sdk][options]") {
  const OptionSpecs specs = {{"activation", OptionType::String, "relu", "nonlinearity", {"relu", "tanh"}},
                             {"path", OptionType::String, nullptr, "data", {}, true}};
  const json described = exogym::sdk::describe_options(specs);
  REQUIRE(described.is_array());
  REQUIRE(described.size() == 2);
  CHECK(described[0] == json({{"name", "activation"},
                              {"type", "string"},
                              {"default", "relu"},
                              {"doc", "nonlinearity"},
                              {"choices", {"relu", "tanh"}}}));
  CHECK(described[1]["required"] == true);
  CHECK_FALSE(described[0].contains("required"));
  // Bounds, nouns and nested keys are described too, so that a JSON Schema
  // can be generated from the description.
  OptionSpec section{"network", OptionType::Section, json::object(), "links"};
  OptionSpec bandwidth{"bandwidth", OptionType::String, "1Gbit/s", "per link"};
  bandwidth.noun = "bandwidth";
  OptionSpec nodes{"nodes", OptionType::PositiveInteger, 1, "nodes"};
  nodes.maximum = 7;
  section.fields = {bandwidth, nodes};
  const json nested = exogym::sdk::describe_options({section});
  CHECK(nested[0]["type"] == "object");
  CHECK(nested[0]["fields"][0] == json({{"name", "bandwidth"},
                                        {"type", "string"},
                                        {"default", "1Gbit/s"},
                                        {"doc", "per link"},
                                        {"noun", "bandwidth"}}));
  CHECK(nested[0]["fields"][1]["maximum"] == 7);
  CHECK_FALSE(nested[0]["fields"][0].contains("maximum"));
  CHECK(std::string(exogym::sdk::to_string(OptionType::NonEmptyString)) == "non-empty string");
  CHECK(std::string(exogym::sdk::to_string(OptionType::Table)) == "table");
  CHECK(std::string(exogym::sdk::to_string(OptionType::PositiveInteger)) == "positive integer");
  CHECK(std::string(exogym::sdk::to_string(OptionType::IntegerList)) == "list of positive integers");
}

TEST_CASE("only optimizer objects without a name merge over the plugin's fallback", "[sdk][optim]") {
  // DiLoCo's outer optimizer with only the learning rate changed.
  auto merged = OptimizerSpec::from_json({{"lr", 0.5}}, "o", kDilocoOuter);
  CHECK(merged.name == "sgd");
  CHECK(merged.lr() == 0.5);
  CHECK(merged.params["momentum"] == 0.9);
  CHECK(merged.params["nesterov"] == true);
  CHECK(merged.params["dampening"] == 0.0);
  // Named, even the fallback's own optimizer: a complete spec with PyTorch's
  // defaults, so momentum 0 no longer inherits the fallback's Nesterov.
  auto named = OptimizerSpec::from_json({{"name", "SGD"}, {"lr", 0.5}}, "o", kDilocoOuter);
  CHECK(named.to_json() == OptimizerSpec::from_json({{"name", "sgd"}, {"lr", 0.5}}, "o").to_json());
  CHECK(named.params["momentum"] == 0.0);
  CHECK(named.params["nesterov"] == false);
  auto plain = OptimizerSpec::from_json({{"name", "sgd"}, {"lr", 1.0}, {"momentum", 0.0}}, "o", kDilocoOuter);
  CHECK(plain.params["nesterov"] == false);
  // Another optimizer: PyTorch's defaults of that one, nothing inherited.
  auto other = OptimizerSpec::from_json({{"name", "adamw"}, {"lr", 0.5}}, "o", kDilocoOuter);
  CHECK(other.name == "adamw");
  CHECK(other.lr() == 0.5);
  CHECK(other.params["weight_decay"] == 0.01);
  // A bare name means that optimizer's defaults; null means the fallback.
  CHECK(OptimizerSpec::from_json("sgd", "o", kDilocoOuter).params["momentum"] == 0.0);
  CHECK(OptimizerSpec::from_json(nullptr, "o", kDilocoOuter).to_json() ==
        OptimizerSpec::from_json(kDilocoOuter, "o").to_json());
  // Through validate_options, with the declared default as the fallback.
  const json resolved =
      exogym::sdk::validate_options({{"outer_optimizer", {{"lr", 0.5}}}}, strategy_specs(), "strategy.options");
  CHECK(resolved["outer_optimizer"] == json({{"name", "sgd"},
                                             {"lr", 0.5},
                                             {"momentum", 0.9},
                                             {"dampening", 0.0},
                                             {"weight_decay", 0.0},
                                             {"nesterov", true}}));
  auto error = config_error([] {
    exogym::sdk::validate_options({{"outer_optimizer", {{"lrr", 1}}}}, strategy_specs(), "strategy.options");
  });
  CHECK(error.path() == "strategy.options.outer_optimizer.lrr");
  CHECK_THAT(error.what(), Catch::Contains("unknown hyper-parameter of sgd; did you mean \"lr\"?"));
}
