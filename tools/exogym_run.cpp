// exogym-run: train the runs of a manifest on a simulated cluster.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/tool.h"
#include "exogym/runtime/command/run_command.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/json_schema.h"
#include "exogym/runtime/manifest/seeds.h"
#include "exogym/runtime/plugin/catalog.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/error.h"

namespace {

namespace rt = exogym::runtime;
using exogym::sdk::ConfigError;

struct Flags {
  std::string manifest, resume, seeds;
  int64_t from_step = -1;
  std::vector<std::string> overrides, only, plugin_dirs;
  bool list_plugins = false;
  bool with_options = false;
  bool schema = false;
  bool force = false;
  std::string progress = "auto";
  // Several processes: flags win over the torchrun variables.
  int nproc = 0, world_size = 0, rank = -1, master_port = 0;
  std::string master_addr;
  double timeout = 0;
  bool partial_reduce = false;
};

void add_process_flags(CLI::App& app, Flags& f) {
  const std::string procs = "Several processes (docs/multiprocess.md)";
  app.add_option("--nproc", f.nproc, "start P processes on this host, each hosting a block of the nodes")
      ->type_name("P")
      ->check(CLI::Range(1, 1024))
      ->group(procs);
  app.add_option("--world-size", f.world_size, "this process is one of W (env WORLD_SIZE)")
      ->type_name("W")
      ->check(CLI::Range(1, 1000000))
      ->group(procs);
  app.add_option("--rank", f.rank, "this process's rank, 0 to W-1 (env RANK); process 0 writes the run folder")
      ->type_name("R")
      ->check(CLI::Range(0, 1000000))
      ->group(procs);
  app.add_option("--master-addr", f.master_addr, "where process 0 runs (env MASTER_ADDR; default 127.0.0.1)")
      ->type_name("HOST")
      ->group(procs);
  app.add_option("--master-port", f.master_port,
                 "its rendezvous port (env MASTER_PORT; default 29500; "
                 "with --nproc: a free port)")
      ->type_name("PORT")
      ->check(CLI::Range(1, 65535))
      ->group(procs);
  app.add_option("--timeout", f.timeout, "how long to wait for processes to join, and for a silent peer (60)")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber & CLI::Range(1e-3, 1e6))
      ->group(procs);
  app.add_flag("--partial-reduce", f.partial_reduce,
               "sum per process first: K/P times less traffic between "
               "processes, but not bit-identical to one process")
      ->group(procs);
}

void add_flags(CLI::App& app, Flags& f) {
  auto* manifest = app.add_option("manifest", f.manifest, "the manifest (JSON) to run")->type_name("MANIFEST.json");
  const std::string runs = "Runs";
  app.add_option("--set", f.overrides,
                 "override a manifest field, e.g. --set train.max_steps=50 (VALUE is JSON "
                 "if it parses, else a string; repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->group(runs);
  app.add_option("--only", f.only, "run only this variant of \"runs\" (repeatable)")
      ->type_name("VARIANT")
      ->allow_extra_args(false)
      ->group(runs);
  app.add_option("--seeds", f.seeds,
                 "run every variant once per seed, e.g. --seeds 1,2,3; replaces the manifest's seed and seeds "
                 "(docs/manifest.md#seeds)")
      ->type_name("S1,S2,...")
      ->group(runs);
  app.add_option("--plugin-path", f.plugin_dirs, "look for plugins in DIR first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->group(runs);
  app.add_option("--resume", f.resume,
                 "continue the run in RUN_FOLDER from its newest checkpoint (a comparison's folder: each run not "
                 "finished), instead of a manifest; --set may change "
                 "train.max_steps, eval.*, checkpoint.* and output.* (docs/checkpoints.md)")
      ->type_name("RUN_FOLDER")
      ->group(runs);
  app.add_option("--from-step", f.from_step, "with --resume: the checkpoint of step N instead of the newest")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber)
      ->group(runs);
  auto* list = app.add_flag("--list-plugins", f.list_plugins, "list the plugins found (without loading them) and exit")
                   ->group(runs);
  app.add_flag("--with-options", f.with_options,
               "with --list-plugins: load each usable plugin (runs its code) and list its options")
      ->needs(list)
      ->group(runs);
  app.add_flag("--schema", f.schema,
               "print the JSON Schema of manifests, with the options of the plugins found (loading them), and exit "
               "(docs/manifest.md#the-schema-in-editors)")
      ->excludes(manifest)
      ->excludes(list)
      ->group(runs);
  app.add_flag("--force", f.force,
               "start even when the nodes' memory estimate exceeds the memory available (docs/failures.md)")
      ->group(runs);
  app.add_option("--progress", f.progress,
                 "auto (a live line on a terminal, else lines), live, lines, jsonl (one JSON object per event on "
                 "stdout) or none")
      ->check(CLI::IsMember({"auto", "live", "lines", "jsonl", "none"}))
      ->group("Output");
  add_process_flags(app, f);
}

rt::output::Progress::Mode progress_mode(const std::string& name, bool quiet) {
  using Mode = rt::output::Progress::Mode;
  if (quiet || name == "none") return Mode::Quiet;
  if (name == "live") return Mode::Live;
  if (name == "lines") return Mode::Lines;
  if (name == "jsonl") return Mode::Jsonl;
  return rt::output::Progress::mode_for_stderr(false);
}

// The world from the environment, overridden by flags.
rt::dist::WorldSpec world_of(const Flags& f) {
  rt::dist::WorldSpec world = rt::dist::world_from_environment();
  if (f.world_size > 0) world.size = f.world_size;
  if (f.rank >= 0) world.rank = f.rank;
  if (!f.master_addr.empty()) world.master_addr = f.master_addr;
  if (f.master_port > 0) world.master_port = f.master_port;
  if (f.timeout > 0) world.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(f.timeout * 1000)));
  world.partial_reduce = f.partial_reduce;
  if (f.nproc > 0 && (f.rank >= 0 || f.world_size > 0)) {
    throw ConfigError("--nproc", "starts every process itself: leave out --rank and --world-size");
  }
  if (f.nproc == 0) rt::dist::validate_world(world);
  return world;
}

// What each process started by --nproc runs: this command without the
// launcher's own flags (the launcher sets RANK, WORLD_SIZE, ... for each).
std::vector<std::string> child_arguments(const Flags& f, const exogym::tools::LogOptions& log) {
  std::vector<std::string> args = {"--progress=" + f.progress};
  if (!f.manifest.empty()) args.insert(args.begin(), f.manifest);
  if (!f.resume.empty()) args.push_back("--resume=" + f.resume);
  if (f.from_step >= 0) args.push_back("--from-step=" + std::to_string(f.from_step));
  for (const auto& o : f.overrides) args.push_back("--set=" + o);
  for (const auto& o : f.only) args.push_back("--only=" + o);
  if (!f.seeds.empty()) args.push_back("--seeds=" + f.seeds);
  for (const auto& d : f.plugin_dirs) args.push_back("--plugin-path=" + d);
  if (f.timeout > 0) args.push_back("--timeout=" + std::to_string(f.timeout));
  if (f.partial_reduce) args.emplace_back("--partial-reduce");
  if (f.force) args.emplace_back("--force");
  if (log.quiet) args.emplace_back("--quiet");
  for (int i = 0; i < log.verbose; ++i) args.emplace_back("--verbose");
  if (!log.level.empty()) args.push_back("--log-level=" + log.level);
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  exogym::tools::Tool tool("exogym-run",
                           "Simulates distributed training of a manifest's nodes on this machine and "
                           "writes one run folder per run (docs/manifest.md).");
  Flags flags;
  add_flags(tool.app(), flags);
  const int status = tool.run(argc, argv, [&] {
    rt::command::RunCommand command;
    command.world = world_of(flags);
    // Over several processes every line says which process wrote it; only
    // process 0 reports progress and results.
    const bool distributed = flags.nproc == 0 && command.world.distributed();
    const std::string rank = std::to_string(command.world.rank);
    if (distributed) tool.set_display_name("exogym-run[" + rank + "]");
    auto log = tool.make_logger(distributed ? "[%H:%M:%S] [" + rank + "] %^%l%$: %v" : "[%H:%M:%S] %^%l%$: %v");
    if (distributed && command.world.rank != 0 && tool.log_options().level.empty()) {
      log->set_level(std::max(log->level(), spdlog::level::warn));
    }
    rt::plugin::PluginLoader loader({flags.plugin_dirs.begin(), flags.plugin_dirs.end()});
    if (flags.list_plugins) {
      std::fputs(rt::plugin::plugin_catalog(loader, flags.with_options).c_str(), stdout);
      return 0;
    }
    if (flags.schema) {
      const auto schema = rt::manifest::manifest_json_schema(rt::plugin::plugin_options(loader));
      std::fputs((schema.dump(2) + "\n").c_str(), stdout);
      return 0;
    }
    if (!flags.resume.empty() && !flags.manifest.empty())
      throw ConfigError("--resume", "takes the run folder instead of a manifest: leave out " + flags.manifest);
    if (tool.app().count("--seeds") && !flags.resume.empty())
      throw ConfigError("--seeds", "cannot change a run being resumed: resume each seed-N folder on its own");
    if (flags.from_step >= 0 && flags.resume.empty()) throw ConfigError("--from-step", "needs --resume RUN_FOLDER");
    if (flags.manifest.empty() && flags.resume.empty())
      throw CLI::RequiredError("a manifest (or --resume RUN_FOLDER, --list-plugins or --schema)");
    // Resuming, errors name the run folder's files themselves.
    if (flags.resume.empty()) tool.set_input(flags.manifest);
    command.manifest = flags.manifest;
    command.resume = flags.resume;
    if (flags.from_step >= 0) command.from_step = flags.from_step;
    command.overrides = flags.overrides;
    command.force = flags.force;
    command.only = flags.only;
    if (tool.app().count("--seeds")) command.seeds = rt::manifest::parse_seed_list(flags.seeds);
    command.progress = progress_mode(flags.progress, tool.log_options().quiet);
    command.nproc = flags.nproc;
    command.explicit_master_port = flags.master_port > 0;
    if (flags.nproc > 0) command.child_args = child_arguments(flags, tool.log_options());
    return rt::command::run_command(command, loader);
  });
  // Everything the run wrote is closed by now (the loader, which must outlive
  // what its plugins made, went out of scope inside tool.run).
  exogym::tools::exit_without_teardown(status);
}
