// The plugin loader: lookup, version checks before any plugin code runs,
// option validation, lifetime.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "cli_helpers.h"
#include "exogym/runtime/plugin/catalog.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/plugin_abi.h"
#include "exogym/sdk/strategy.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::plugin::PluginLoader;

static const fs::path kTestPlugins = EXOGYM_TEST_PLUGIN_DIR;

TEST_CASE("plugins are found by kind and name and describe themselves", "[loader]") {
  auto& loader = exogym::test::test_loader();
  auto plugin = loader.load("strategy", "allreduce", "strategy.plugin");
  REQUIRE(plugin->description().kind == "strategy");
  REQUIRE(plugin->description().name == "allreduce");
  REQUIRE(plugin->description().abi_version == exogym::sdk::runtime_abi_version());
  REQUIRE(plugin->description().file.filename() == "exogym_strategy_allreduce.so");
  // Loading twice gives the same library.
  REQUIRE(loader.load("strategy", "allreduce", "strategy.plugin") == plugin);
}

TEST_CASE("an unknown plugin name is an error naming the field, with a suggestion", "[loader]") {
  auto& loader = exogym::test::test_loader();
  REQUIRE_THROWS_WITH(loader.load("strategy", "allreduc", "strategy.plugin"),
                      Catch::StartsWith("strategy.plugin: no strategy plugin named \"allreduc\"") &&
                          Catch::Contains("did you mean \"allreduce\"?"));
  REQUIRE_THROWS_WITH(loader.load("model", "allreduce", "model.plugin"),
                      Catch::StartsWith("model.plugin: no model plugin named \"allreduce\""));
}

TEST_CASE("a plugin built with another ABI version is refused before its code runs", "[loader]") {
  PluginLoader loader;
  // The plugin's options function calls abort(): reaching it would kill the test.
  REQUIRE_THROWS_WITH(
      loader.load_file(kTestPlugins / "exogym_strategy_wrong_abi.so"),
      Catch::Contains("exogym_strategy_wrong_abi.so") && Catch::Contains("built for plugin ABI version 999") &&
          Catch::Contains("this runtime uses ABI version " + std::to_string(exogym::sdk::runtime_abi_version())));
  REQUIRE_THROWS_AS(loader.load_file(kTestPlugins / "exogym_strategy_wrong_abi.so"), exogym::sdk::PluginError);
}

TEST_CASE("a plugin built with another compiler or LibTorch is refused", "[loader]") {
  PluginLoader loader;
  REQUIRE_THROWS_WITH(loader.load_file(kTestPlugins / "exogym_strategy_wrong_fingerprint.so"),
                      Catch::Contains("built with \"gcc-1;cxx11abi=0;torch=0.1\"") &&
                          Catch::Contains(exogym::sdk::runtime_fingerprint()));
}

TEST_CASE("a path ending in .so is loaded directly, relative to the manifest folder", "[loader]") {
  PluginLoader loader;
  auto plugin = loader.load("strategy", "exogym_strategy_faulty.so", "strategy.plugin", kTestPlugins);
  REQUIRE(plugin->description().name == "faulty");
  REQUIRE_THROWS_WITH(loader.load("strategy", "missing.so", "strategy.plugin", kTestPlugins),
                      Catch::StartsWith("strategy.plugin: ") && Catch::Contains("no such plugin file"));
  // The kind must match the field it is used for.
  REQUIRE_THROWS_WITH(loader.load("model", "exogym_strategy_faulty.so", "model.plugin", kTestPlugins),
                      Catch::Contains("is a strategy plugin, expected a model plugin"));
}

TEST_CASE("EXOGYM_PLUGIN_PATH is searched", "[loader]") {
  ::setenv("EXOGYM_PLUGIN_PATH", (std::string("/nonexistent:") + EXOGYM_TEST_PLUGIN_DIR).c_str(), 1);
  PluginLoader loader;
  auto dirs = loader.search_path();
  std::shared_ptr<exogym::runtime::plugin::LoadedPlugin> plugin;
  REQUIRE_NOTHROW(plugin = loader.load("dataset", "counting", "data.train.dataset"));
  ::unsetenv("EXOGYM_PLUGIN_PATH");
  REQUIRE(std::find(dirs.begin(), dirs.end(), fs::canonical(kTestPlugins)) != dirs.end());
  REQUIRE(plugin->description().kind == "dataset");
}

TEST_CASE("the search path ends with the executable's own plugin folder and holds no configured prefix", "[loader]") {
  // A stale install in the build's configured prefix (/usr/local) must not
  // shadow a relocated install's own plugins: after the flags and
  // EXOGYM_PLUGIN_PATH comes bin/../lib/exogym/plugins, and nothing else.
  ::unsetenv("EXOGYM_PLUGIN_PATH");
  PluginLoader loader({kTestPlugins});
  const fs::path own = fs::weakly_canonical(fs::path(EXOGYM_BINARY_DIR) / "lib" / "exogym" / "plugins");
  REQUIRE(loader.search_path() == std::vector<fs::path>{fs::canonical(kTestPlugins), own});
}

TEST_CASE("discover lists the built plugins from their records", "[loader]") {
  PluginLoader loader;  // the build tree, next to the test binary
  auto found = loader.discover();
  std::map<std::string, std::string> kinds;
  for (const auto& f : found) {
    REQUIRE(f.error.empty());  // every shipped plugin is usable
    kinds[f.description.name] = f.description.kind;
  }
  REQUIRE(kinds["allreduce"] == "strategy");
  REQUIRE(kinds["mlp"] == "model");
  REQUIRE(kinds["cnn"] == "model");
  REQUIRE(kinds.count("faulty") == 0);  // test plugins live elsewhere
}

TEST_CASE("the plugin list lists options only with --with-options, the built-in datasets' too", "[loader]") {
  PluginLoader loader;
  const std::string bare = exogym::runtime::plugin::plugin_catalog(loader, false);
  CHECK_THAT(bare, Catch::Contains("\ndataset  synthetic      built in\n"));
  CHECK_THAT(bare, Catch::Contains("\nstrategy allreduce "));
  CHECK_THAT(bare, !Catch::Contains("\n    "));  // an option's line
  const std::string full = exogym::runtime::plugin::plugin_catalog(loader, true);
  CHECK_THAT(full, Catch::Contains("built in\n    "));  // synthetic's options follow it
  CHECK_THAT(full, Catch::Contains("\n    optimizer "));
}

TEST_CASE("plugin options are validated with JSON paths", "[loader]") {
  auto plugin = exogym::test::test_loader().load("strategy", "allreduce", "strategy.plugin");
  auto resolved = plugin->validate(nlohmann::json::object(), "strategy.options");
  REQUIRE(resolved["optimizer"]["name"] == "adamw");
  REQUIRE(resolved["optimizer"]["weight_decay"] == 0.01);
  REQUIRE(resolved["max_norm"].is_null());
  REQUIRE_THROWS_WITH(plugin->validate({{"H", 20}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.H: unknown option"));
  REQUIRE_THROWS_WITH(plugin->validate({{"max_norm", -1}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.max_norm: expected a positive number"));
}

TEST_CASE("objects made by a plugin keep its library loaded", "[loader]") {
  std::shared_ptr<exogym::sdk::Model> model;
  {
    PluginLoader loader;
    auto plugin = loader.load("model", "mlp", "model.plugin");
    model = plugin->create_model(plugin->validate(nullptr, "model.options"));
  }  // the loader and its reference to the plugin are gone
  // Calling into the model (code inside the library) still works.
  REQUIRE(model->network().parameters().size() == 4);
  REQUIRE(model->metric_names() == std::vector<std::string>{"accuracy"});
  model.reset();  // destroyed first, then the library unloads
}

TEST_CASE("no plugin code runs for --list-plugins, a misspelt name or a refused plugin", "[loader]") {
  exogym::test::TempDir dir("plugin-marker");
  const fs::path marker = dir / "marker";
  const std::map<std::string, std::string> env{{"EXOGYM_TEST_MARKER", marker.string()}};
  const std::vector<std::string> path{"--plugin-path", kTestPlugins.string()};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), path.begin(), path.end());
    return exogym::test::run_cli(args, dir / "log.txt", 60, env);
  };
  auto listed = run({"--list-plugins"});
  CHECK(listed.code == 0);
  CHECK_THAT(listed.output,
             Catch::Contains("strategy marker ") &&
                 Catch::Contains("[unusable] " + (kTestPlugins / "exogym_strategy_marker_wrong_abi.so").string()) &&
                 Catch::Contains("built for plugin ABI version 999"));
  CHECK_FALSE(fs::exists(marker));

  auto manifest = exogym::test::small_manifest(2);
  manifest["strategy"] = {{"plugin", "markr"}};
  auto typo = run({exogym::test::write_manifest(dir, "typo", manifest).string()});
  CHECK(typo.code == 2);
  CHECK_THAT(typo.output, Catch::Contains("did you mean \"marker\"?"));
  CHECK_FALSE(fs::exists(marker));

  manifest["strategy"] = {{"plugin", (kTestPlugins / "exogym_strategy_marker_wrong_abi.so").string()}};
  auto refused = run({exogym::test::write_manifest(dir, "refused", manifest).string()});
  CHECK(refused.code == 2);
  CHECK_THAT(refused.output, Catch::Contains("built for plugin ABI version 999"));
  CHECK_FALSE(fs::exists(marker));

  // The marker does appear once a usable plugin is loaded: the checks above can fail.
  CHECK(run({"--list-plugins", "--with-options"}).code == 0);
  CHECK(exogym::test::read_text(marker) == "marker");
}

TEST_CASE("a FIFO, a device or a non-library named like a plugin is refused without blocking", "[loader]") {
  exogym::test::TempDir dir("plugin-special");
  REQUIRE(::mkfifo((dir / "exogym_strategy_fifo.so").c_str(), 0600) == 0);
  fs::create_symlink("/dev/zero", dir / "exogym_strategy_zero.so");
  std::ofstream(dir / "exogym_strategy_garbage.so") << "not a library";
  auto listed = exogym::test::run_cli({"--plugin-path", dir.path().string(), "--list-plugins"}, dir / "log.txt", 30);
  CHECK(listed.code == 0);
  CHECK_THAT(listed.output,
             Catch::Contains("exogym_strategy_garbage.so\n  " + (dir / "exogym_strategy_garbage.so").string() +
                             ": not a shared library (13 bytes that are not a 64-bit ELF file"));
  CHECK_THAT(listed.output, !Catch::Contains("exogym_strategy_fifo.so") && !Catch::Contains("exogym_strategy_zero.so"));

  PluginLoader loader({dir.path()});
  for (const std::string name : {"fifo", "zero"}) {
    // (The symlink to /dev/zero is named by its target.)
    CHECK_THROWS_WITH(loader.load("strategy", name, "strategy.plugin"),
                      Catch::Contains(": not a regular file (a plugin is a shared library)"));
  }
  // Suggestions come from the regular files' names.
  CHECK_THROWS_WITH(loader.load("strategy", "fif", "strategy.plugin"),
                    Catch::Contains("(available: garbage ") && !Catch::Contains("fifo") && !Catch::Contains("zero"));
}
