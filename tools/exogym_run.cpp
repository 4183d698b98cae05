// exogym-run: train the runs of a manifest on a simulated cluster.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/interrupt.h"
#include "exogym/runtime/manifest.h"
#include "exogym/runtime/plugin_loader.h"
#include "exogym/runtime/runner.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"

namespace {

const char* kUsage = R"(usage: exogym-run [options] MANIFEST.json
       exogym-run --list-plugins [--plugin-path DIR]

Simulates distributed training of the manifest's nodes on this machine and
writes one run folder per run (see README.md, "Run outputs").

options:
  --set KEY=VALUE      override a manifest field, e.g. --set train.max_steps=50
                       (VALUE is JSON if it parses, else a string; repeatable)
  --only VARIANT       run only this variant of "runs" (repeatable)
  --plugin-path DIR    look for plugins in DIR first (repeatable)
  --list-plugins       list the plugins found, with their options, and exit
  --quiet              no progress output
  --version            print the version and exit
  -h, --help           this text
)";

void print_options(const exogym::sdk::OptionSpecs& options) {
  for (const auto& o : options) {
    std::string def = o.required ? "required" : "default " + o.default_value.dump();
    std::printf("    %-20s %-26s %s\n", o.name.c_str(), exogym::sdk::to_string(o.type), def.c_str());
    std::string doc = o.doc;
    if (!o.choices.empty()) {
      doc += doc.empty() ? "one of:" : " (one of:";
      for (const auto& c : o.choices) doc += " " + c;
      if (!o.doc.empty()) doc += ")";
    }
    if (!doc.empty()) std::printf("    %-20s %s\n", "", doc.c_str());
  }
}

void list_plugins(exogym::runtime::PluginLoader& loader) {
  for (const auto& name : exogym::runtime::data::builtin_dataset_names()) {
    std::printf("%-8s %-14s built in\n", "dataset", name.c_str());
    print_options(*exogym::runtime::data::builtin_dataset_options(name));
  }
  std::printf("\n");
  auto found = loader.discover();
  std::printf("plugin search path:\n");
  for (const auto& dir : loader.search_path()) std::printf("  %s\n", dir.string().c_str());
  if (found.empty()) std::printf("no plugins found\n");
  for (const auto& f : found) {
    if (!f.plugin) {
      std::printf("\n[unusable] %s\n  %s\n", f.file.string().c_str(), f.error.c_str());
      continue;
    }
    const auto& d = f.plugin->description();
    std::printf("\n%-8s %-14s %s  %s\n", d.kind.c_str(), d.name.c_str(), d.version.c_str(), d.file.string().c_str());
    print_options(f.plugin->options());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> overrides, only;
  std::vector<std::filesystem::path> plugin_dirs;
  std::string manifest;
  bool list = false, quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "exogym-run: %s needs a value\n%s", flag, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--version") {
      std::printf("exogym-run 0.1.0 (plugin ABI %d, %s)\n", exogym::sdk::runtime_abi_version(),
                  exogym::sdk::runtime_fingerprint());
      return 0;
    } else if (arg == "--set") {
      overrides.push_back(value("--set"));
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
    } else if (arg == "--only") {
      only.push_back(value("--only"));
    } else if (arg == "--plugin-path") {
      plugin_dirs.emplace_back(value("--plugin-path"));
    } else if (arg == "--list-plugins") {
      list = true;
    } else if (arg == "--quiet" || arg == "-q") {
      quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "exogym-run: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (manifest.empty()) {
      manifest = arg;
    } else {
      std::fprintf(stderr, "exogym-run: more than one manifest given (%s, %s)\n", manifest.c_str(), arg.c_str());
      return 2;
    }
  }
  auto log = spdlog::stderr_color_mt("exogym");
  log->set_pattern("[%H:%M:%S] %^%l%$: %v");
  if (quiet) log->set_level(spdlog::level::warn);
  exogym::runtime::PluginLoader loader(plugin_dirs);
  if (list) {
    list_plugins(loader);
    return 0;
  }
  if (manifest.empty()) {
    std::fprintf(stderr, "exogym-run: no manifest given\n%s", kUsage);
    return 2;
  }
  exogym::runtime::install_interrupt_handlers();
  try {
    auto set = exogym::runtime::load_manifest(manifest, overrides);
    exogym::runtime::RunnerOptions options;
    options.progress = exogym::runtime::Progress::mode_for_stderr(quiet);
    options.only = only;
    auto result = exogym::runtime::run_manifest_set(set, loader, options);
    if (!result.table.empty()) {
      std::printf("\n%s\n%s", set.name.c_str(), result.table.c_str());
    } else if (!result.runs.empty() && result.runs.front().final_eval) {
      const auto& r = result.runs.front();
      std::printf("%s: final local loss %.4f, global loss %.4f", r.name.c_str(), r.final_eval->local.loss,
                  r.final_eval->global.loss);
      for (size_t i = 0; i < r.metric_names.size(); ++i) {
        std::printf(", global %s %.4f", r.metric_names[i].c_str(), r.final_eval->global.metrics[i]);
      }
      std::printf(" (%.1f s)\n", r.wall_seconds);
    }
    std::printf("outputs: %s\n", result.folder.string().c_str());
    return 0;
  } catch (const exogym::runtime::Interrupted& e) {
    std::fprintf(stderr, "\nexogym-run: %s; the run folder keeps what was written so far\n", e.what());
    return 130;
  } catch (const exogym::sdk::ConfigError& e) {
    std::fprintf(stderr, "exogym-run: %s: %s\n", manifest.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nexogym-run: error: %s\n", e.what());
    return 1;
  }
}
