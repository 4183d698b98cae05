#pragma once
// What `exogym-run MANIFEST` does, as one library call: read the manifest,
// then run it in this process, as one process of several (torchrun-style
// WORLD_SIZE/RANK), or by starting --nproc processes on this host and
// supervising them. The tool itself only parses flags into a RunCommand.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/output/progress.h"

namespace exogym::runtime::plugin {
class PluginLoader;
}

namespace exogym::runtime::command {

struct RunCommand {
  std::filesystem::path manifest;
  // Non-empty instead of `manifest`: continue the run in this folder from
  // its newest checkpoint, or the one of step from_step (command/resume.h).
  std::filesystem::path resume;
  std::optional<int64_t> from_step;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::vector<std::string> only;       // --only VARIANT
  std::vector<uint64_t> seeds;         // --seeds: replace the manifest's "seed" and "seeds"
  output::Progress::Mode progress = output::Progress::Mode::Lines;
  dist::WorldSpec world;  // one process of several when world.size > 1
  // > 0: start this many processes on this host, each with `child_args`,
  // and supervise them (this process trains nothing).
  int nproc = 0;
  std::vector<std::string> child_args;
  bool explicit_master_port = false;  // with nproc: use world.master_port, not a free one
  bool force = false;                 // --force: see train::TrainingOptions
};

// Runs the command; prints the result (the comparison table, or the final
// losses, and where the outputs are; in JSONL progress mode one JSON line)
// on stdout. Returns the exit status: 0, or with `nproc` the launcher's.
// Throws sdk::ConfigError for manifest problems, host::Interrupted after
// Ctrl-C/SIGTERM, sdk::Error when training fails. A process of several
// reports its failure to the others before it throws.
int run_command(const RunCommand& command, plugin::PluginLoader& loader);

}  // namespace exogym::runtime::command
