// exogym-run: train the runs of a manifest on a simulated cluster.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/cluster/cluster.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/cluster/interrupt.h"
#include "exogym/runtime/dist/launcher.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/run/runner.h"
#include "exogym/runtime/dist/world.h"
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

several processes (see README.md, "Several processes and hosts"):
  --nproc P            start P processes on this host, each hosting a block of
                       the nodes, and supervise them
  --world-size W       this process is one of W (env WORLD_SIZE); start one
                       exogym-run per RANK, on any hosts
  --rank R             this process's rank, 0 to W-1 (env RANK); process 0
                       hosts the rendezvous and writes the run folder
  --master-addr HOST   where process 0 runs (env MASTER_ADDR; default 127.0.0.1)
  --master-port PORT   its rendezvous port (env MASTER_PORT; default 29500;
                       with --nproc: a free port)
  --timeout SECONDS    how long to wait for the processes to join, and for a
                       peer that shows no sign of life, before failing (60)
  --partial-reduce     sum per process first, then across processes: K/P
                       times less traffic between processes, but the last
                       bits differ from one process (default: every process
                       sums all K nodes in rank order, bit-identical)
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

void list_plugins(exogym::runtime::plugin::PluginLoader& loader) {
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
  // Multi-process settings: the environment, overridden by flags.
  exogym::runtime::dist::WorldSpec world;
  try {
    world = exogym::runtime::dist::world_from_environment();
  } catch (const exogym::sdk::ConfigError& e) {
    std::fprintf(stderr, "exogym-run: %s\n", e.what());
    return 2;
  }
  int nproc = 0;
  bool rank_flag = false, world_flag = false, port_flag = false;
  // Each process started by --nproc gets these arguments minus the launcher's own.
  std::vector<std::string> child_args;
  auto integer = [&](const std::string& flag, const std::string& text, int low, int high) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < low || v > high) {
      std::fprintf(stderr, "exogym-run: %s: expected an integer from %d to %d, got \"%s\"\n", flag.c_str(), low, high,
                   text.c_str());
      std::exit(2);
    }
    return static_cast<int>(v);
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "exogym-run: %s needs a value\n%s", flag, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    const int start = i;
    bool launcher_only = false;
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
    } else if (arg == "--nproc") {
      nproc = integer(arg, value("--nproc"), 1, 1024);
      launcher_only = true;
    } else if (arg == "--world-size") {
      world.size = integer(arg, value("--world-size"), 1, 1000000);
      world_flag = true;
      launcher_only = true;
    } else if (arg == "--rank") {
      world.rank = integer(arg, value("--rank"), 0, 1000000);
      rank_flag = true;
      launcher_only = true;
    } else if (arg == "--master-addr") {
      world.master_addr = value("--master-addr");
      launcher_only = true;
    } else if (arg == "--master-port") {
      world.master_port = integer(arg, value("--master-port"), 1, 65535);
      port_flag = true;
      launcher_only = true;
    } else if (arg == "--timeout") {
      const std::string text = value("--timeout");
      char* end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
        std::fprintf(stderr, "exogym-run: --timeout: expected a positive number of seconds, got \"%s\"\n",
                     text.c_str());
        return 2;
      }
      world.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
    } else if (arg == "--partial-reduce") {
      world.partial_reduce = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "exogym-run: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (manifest.empty()) {
      manifest = arg;
    } else {
      std::fprintf(stderr, "exogym-run: more than one manifest given (%s, %s)\n", manifest.c_str(), arg.c_str());
      return 2;
    }
    if (!launcher_only) {
      for (int j = start; j <= i; ++j) child_args.push_back(argv[j]);
    }
  }
  if (nproc > 0 && (rank_flag || world_flag)) {
    std::fprintf(stderr, "exogym-run: --nproc starts every process itself: leave out --rank and --world-size\n");
    return 2;
  }
  if (nproc == 0) {
    try {
      exogym::runtime::dist::validate_world(world);
    } catch (const exogym::sdk::ConfigError& e) {
      std::fprintf(stderr, "exogym-run: %s\n", e.what());
      return 2;
    }
  }
  const bool distributed = nproc == 0 && world.distributed();
  // Over several processes every line says which process wrote it; only
  // process 0 reports progress and results.
  const std::string who = distributed ? "exogym-run[" + std::to_string(world.rank) + "]" : "exogym-run";
  auto log = spdlog::stderr_color_mt("exogym");
  log->set_pattern(distributed ? "[%H:%M:%S] [" + std::to_string(world.rank) + "] %^%l%$: %v"
                               : "[%H:%M:%S] %^%l%$: %v");
  if (quiet || (distributed && world.rank != 0)) log->set_level(spdlog::level::warn);
  exogym::runtime::plugin::PluginLoader loader(plugin_dirs);
  if (list) {
    list_plugins(loader);
    return 0;
  }
  if (manifest.empty()) {
    std::fprintf(stderr, "exogym-run: no manifest given\n%s", kUsage);
    return 2;
  }
  if (nproc > 0) {
    // Check the manifest once here, so that a mistake is reported once
    // rather than by every process.
    try {
      auto set = exogym::runtime::manifest::load_manifest(manifest, overrides);
      for (const auto& run : set.runs) exogym::runtime::train::check_run(run, loader, nproc);
      exogym::runtime::dist::LaunchSpec spec;
      spec.processes = nproc;
      spec.args = child_args;
      spec.master_addr = "127.0.0.1";
      spec.master_port = port_flag ? world.master_port : 0;
      spec.grace = world.timeout + std::chrono::seconds(5);
      return exogym::runtime::dist::launch_local(spec);
    } catch (const exogym::sdk::ConfigError& e) {
      std::fprintf(stderr, "exogym-run: %s: %s\n", manifest.c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exogym-run: error: %s\n", e.what());
      return 1;
    }
  }
  exogym::runtime::cluster::install_interrupt_handlers();
  std::unique_ptr<exogym::runtime::dist::ProcessMesh> mesh;
  // A failing process tells the others why before it goes.
  auto report_to_peers = [&](const std::string& reason) {
    if (mesh) {
      mesh->fail(reason);  // the others name this process themselves
      mesh.reset();
    }
  };
  try {
    auto set = exogym::runtime::manifest::load_manifest(manifest, overrides);
    exogym::runtime::run::RunnerOptions options;
    options.progress = exogym::runtime::output::Progress::mode_for_stderr(quiet);
    options.only = only;
    if (distributed) {
      mesh = std::make_unique<exogym::runtime::dist::ProcessMesh>(world, exogym::runtime::run::run_fingerprint(set, only));
      options.mesh = mesh.get();
      options.partial_reduce = world.partial_reduce;
      // Processes on one host share its cores.
      options.cores = std::max(1, exogym::runtime::cluster::available_cores() / world.local_size);
    }
    auto result = exogym::runtime::run::run_manifest_set(set, loader, options);
    if (mesh) {
      mesh->finish();
      mesh.reset();
      if (world.rank != 0) return 0;
    }
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
  } catch (const exogym::runtime::cluster::Interrupted& e) {
    std::fprintf(stderr, "\n%s: %s; the run folder keeps what was written so far\n", who.c_str(), e.what());
    report_to_peers(e.what());
    return 130;
  } catch (const exogym::sdk::ConfigError& e) {
    std::fprintf(stderr, "%s: %s: %s\n", who.c_str(), manifest.c_str(), e.what());
    report_to_peers(e.what());
    return 2;
  } catch (const std::exception& e) {
    if (distributed && exogym::runtime::cluster::interrupt_requested()) {
      // Ctrl-C reached every process; this one stopped in a collective when
      // a peer stopped first, which is the same interruption.
      std::fprintf(stderr, "\n%s: interrupted by a signal (Ctrl-C) (%s); the run folder keeps what was written so far\n",
                   who.c_str(), e.what());
      report_to_peers("interrupted by a signal (Ctrl-C)");
      return 130;
    }
    std::fprintf(stderr, "\n%s: error: %s\n", who.c_str(), e.what());
    report_to_peers(e.what());
    return 1;
  }
}
