#pragma once
// A run's checkpoints (checkpoint/ holds the format): when to write them,
// what the run folder adds to them, and resuming from one. docs/checkpoints.md
// describes them for users.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace exogym::runtime::checkpoint {
struct CheckpointIndex;
class CheckpointWriter;
}  // namespace exogym::runtime::checkpoint
namespace exogym::runtime::manifest {
struct Manifest;
}
namespace exogym::runtime::output {
class RunWriter;
}
namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::train {

struct CheckpointState;
class Membership;
class MetricBuffer;
struct ProcessRole;
struct ReportedResults;
struct RunContext;
struct TrainingOptions;
struct TrainingOutputs;
struct TrainingPlugins;
struct TrainingSetup;

// A resumed run, once its replicas and simulated clocks exist: finds the
// checkpoint in options.run_dir (the newest that loads, or
// options.from_step), loads this process's nodes' states and where the run
// starts into `checkpoints`, what process 0 reported into `reported`, and
// the simulated `clocks`; checks that it fits this run (`setup`'s plugins
// and replicas, `config`, config.json's contents): the same ABI and
// plugins, and no change to the manifest beyond the fields that may change
// (checkpoint/resume_rules.h); where the run keeps its clients' states,
// those read and checked too (into checkpoints.resume->clients).
// sdk::DataError or sdk::ConfigError (exit 2) naming what differs; nothing
// in the run folder is changed.
void load_resume_point(const RunContext& run, const TrainingSetup& setup, const nlohmann::json& config,
                       sim::ClockExchange& clocks, CheckpointState& checkpoints, ReportedResults& reported,
                       const TrainingOptions& options);

// Whether the run keeps its clients' states between rounds, and its
// checkpoints hold them (clients.safetensors): participation and a strategy
// with state of its clients (Strategy::has_client_state).
bool keeps_client_states(const manifest::Manifest& m, const TrainingSetup& setup);

// Process 0 of a resumed run, once it is checked: cuts train.csv,
// validation.csv, metrics.csv and comm.csv in `run_dir` back to the
// checkpoint's step (`index`), and removes summary.json (written again at
// the end). sdk::DataError naming a CSV shorter than the checkpoint says.
void cut_outputs_to_checkpoint(const std::filesystem::path& run_dir, const checkpoint::CheckpointIndex& index);

// Once the run folder is open (open_outputs): the writer of checkpoints and
// the stop point (when checkpoint.interval > 0), the index fields every
// checkpoint shares; resuming, the newer checkpoints removed.
void prepare_checkpoints(const RunContext& run, const TrainingPlugins& plugins, const TrainingOutputs& outputs,
                         CheckpointState& checkpoints);

// Whether the nodes write a checkpoint at boundary `step` (steps done): a
// multiple of checkpoint.interval, or the last step.
bool checkpoint_due(const manifest::Manifest& m, const CheckpointState& checkpoints, int64_t step);

// Over several processes, one node of each process other than 0 (`process`),
// once every node of its process is at the checkpoint of `step`: its metric
// rows so far go from `buffer` into the checkpoint's folder, for process 0 to
// append to metrics.csv.
void hand_over_metrics(MetricBuffer& buffer, checkpoint::CheckpointWriter& checkpoint_writer, int process,
                       int64_t step);

// Node 0, once every node's file of `step` is written (and every process's
// metric rows, which go into metrics.csv through `writer`): the index with
// the run-wide state (the CSVs' lengths, `reported`, the membership), then
// the commit. Returns the checkpoint's folder.
std::filesystem::path commit_checkpoint(const ProcessRole& role, output::RunWriter& writer,
                                        const ReportedResults& reported, const Membership& membership,
                                        CheckpointState& checkpoints, int64_t step);

}  // namespace exogym::runtime::train
