#include "exogym/runtime/train/checkpointing.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "exogym/build_config.h"
#include "exogym/runtime/async/async_schedule.h"
#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/runtime/checkpoint/resume_rules.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/train/checkpoint_state.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/metric_buffer.h"
#include "exogym/runtime/train/reported_results.h"
#include "exogym/runtime/train/run_context.h"
#include "exogym/runtime/train/training.h"
#include "exogym/runtime/train/training_outputs.h"
#include "exogym/runtime/train/training_setup.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The run folder's part of a checkpoint: how long each CSV was, and what
// node 0 keeps for the progress, the summary and the target.
json outputs_section(output::RunWriter& writer, const ReportedResults& reported) {
  json section = {{"csv_bytes", writer.flush_csvs()},
                  {"last_train_loss", output::with_finite_numbers(reported.last_train_loss)}};
  section["last_eval"] = nullptr;
  if (reported.last_eval) {
    const EvalRecord& r = *reported.last_eval;
    section["last_eval"] = {{"step", r.step},
                            {"local", r.local.to_json()},
                            {"global", r.global.to_json()},
                            {"bytes_sent", r.bytes_sent},
                            {"sim_time_s", r.sim_time_s}};
  }
  section["target_hit"] = nullptr;
  if (reported.target_hit) {
    const TargetHit& t = *reported.target_hit;
    section["target_hit"] = {
        {"step", t.step}, {"sim_time_s", t.sim_time_s}, {"bytes_sent", t.bytes_sent}, {"wall_seconds", t.wall_seconds}};
  }
  return section;
}

void restore_outputs(ReportedResults& reported, const json& section, const fs::path& index_file) {
  reported.last_eval.reset();
  reported.target_hit.reset();
  try {
    reported.last_train_loss = output::json_number(section.at("last_train_loss"));
    if (const json& e = section.at("last_eval"); !e.is_null()) {
      reported.last_eval =
          EvalRecord{e.at("step"), output::EvalValues::from_json(e.at("local")),
                     output::EvalValues::from_json(e.at("global")), e.at("bytes_sent"), e.at("sim_time_s")};
    }
    if (const json& t = section.at("target_hit"); !t.is_null())
      reported.target_hit = TargetHit{t.at("step").get<int64_t>(), t.at("sim_time_s").get<double>(),
                                      t.at("bytes_sent").get<double>(), t.at("wall_seconds").get<double>()};
  } catch (const json::exception& e) {
    throw sdk::DataError(index_file.string() + ": sections.outputs: " + util::without_json_prefix(e.what()));
  }
}

json plugins_json(const TrainingPlugins& loaded_plugins) {
  json plugins = json::array();
  for (const auto* loaded : {loaded_plugins.model.get(), loaded_plugins.strategy.get()}) {
    const plugin::PluginDescription& d = loaded->description();
    plugins.push_back({{"kind", d.kind},
                       {"name", d.name},
                       {"version", d.version},
                       {"abi", d.abi_version},
                       {"file", d.file.string()}});
  }
  return plugins;
}

std::string plugin_text(const json& p) {
  return p.at("kind").get<std::string>() + " plugin \"" + p.at("name").get<std::string>() + "\" " +
         p.at("version").get<std::string>() + " (ABI " + std::to_string(p.at("abi").get<int>()) + ", " +
         p.at("file").get<std::string>() + ")";
}

// The run must load the plugins, versions and ABI that wrote the checkpoint.
void check_plugins(const TrainingPlugins& plugins, const checkpoint::CheckpointIndex& index,
                   const fs::path& index_file) {
  if (index.abi != EXOGYM_ABI_VERSION) {
    throw sdk::DataError(index_file.string() + ": written by a runtime with plugin ABI " + std::to_string(index.abi) +
                         ", this one has ABI " + std::to_string(EXOGYM_ABI_VERSION));
  }
  const json now = plugins_json(plugins);
  for (size_t i = 0; i < now.size(); ++i) {
    const json& was = i < index.plugins.size() ? index.plugins[i] : json();
    auto same = [&](const char* key) { return was.is_object() && was.at(key) == now[i].at(key); };
    if (!same("kind") || !same("name") || !same("version") || !same("abi")) {
      throw sdk::DataError(index_file.string() + ": written with " +
                           (was.is_object() ? plugin_text(was) : std::string("other plugins")) + ", this run loads " +
                           plugin_text(now[i]));
    }
  }
}

// Every CSV must hold at least the rows the checkpoint had written, and the
// checkpoint's length of it must end a row: cutting anywhere else would
// merge a row with the next.
void check_csvs(const fs::path& run_dir, const checkpoint::CheckpointIndex& index, const fs::path& index_file) {
  const json* lengths = nullptr;
  if (index.sections.is_object() && index.sections.contains("outputs") && index.sections["outputs"].is_object() &&
      index.sections["outputs"].contains("csv_bytes"))
    lengths = &index.sections["outputs"]["csv_bytes"];
  if (!lengths || !lengths->is_object())
    throw sdk::DataError(index_file.string() + ": sections.outputs.csv_bytes: missing or not an object");
  for (const auto& [name, bytes] : lengths->items()) {
    const std::string field = index_file.string() + ": sections.outputs.csv_bytes." + name;
    if (name.find('/') != std::string::npos || name.size() < 5 || name.compare(name.size() - 4, 4, ".csv") != 0)
      throw sdk::DataError(field + ": not a CSV of the run folder");
    if (!bytes.is_number_unsigned())
      throw sdk::DataError(field + ": expected a length in bytes, got " + sdk::json_excerpt(bytes));
    const fs::path file = run_dir / name;
    const auto length = bytes.get<uintmax_t>();
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec || size < length) {
      throw sdk::DataError(file.string() + ": shorter than when the checkpoint of step " + std::to_string(index.step) +
                           " was written (" + std::to_string(length) + " bytes)");
    }
    if (length == 0) continue;
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(length - 1));
    if (in.get() != '\n') {
      throw sdk::DataError(file.string() + ": byte " + std::to_string(length) + ", where " + field +
                           " says it ended, is not the end of a row");
    }
  }
}

}  // namespace

bool keeps_client_states(const manifest::Manifest& m, const TrainingSetup& setup) {
  // Every node's strategy is of one plugin: any of this process's says.
  for (const auto& strategy : setup.replicas.strategies) {
    if (strategy) return m.participation && strategy->has_client_state();
  }
  return false;
}

namespace {

// Whether checkpoint `c` fits this run and its folder: this process's
// nodes' tensors fit their models and their meters read, and, in the
// process that writes the folder, the run-wide state reads and the CSVs hold
// whole rows up to where it says. sdk::DataError naming the file and the
// field otherwise, so that find_checkpoint takes the one before it. What
// process 0 reported goes into `reported`.
void check_fits(const RunContext& run, const TrainingSetup& setup, ReportedResults& reported, const fs::path& run_dir,
                checkpoint::LoadedCheckpoint& c) {
  const Replicas& replicas = setup.replicas;
  for (const auto& [rank, state] : c.nodes) {
    const std::string file = (c.folder / checkpoint::node_file_name(rank)).string();
    checkpoint::check_model_fits(*replicas.models.at(static_cast<size_t>(rank)), state, file);
    try {
      sim::NodeMeter::check_state(state.meter);
    } catch (const std::invalid_argument& e) {
      throw sdk::DataError(file + ": metadata \"meter\": " + e.what());
    }
    if (state.async.meta.is_null()) continue;
    try {
      async::AsyncSchedule::check_node_state(state.async.tensors, state.async.meta);
    } catch (const std::invalid_argument& e) {
      throw sdk::DataError(file + ": metadata \"async\": " + e.what());
    }
  }
  if (keeps_client_states(run.m, setup)) {
    c.clients = checkpoint::read_client_states(c.folder, c.index.step);
    const int clients = run.m.has_population() ? *run.m.participation->clients : run.m.nodes;
    checkpoint::check_client_states(c.clients, clients, (c.folder / checkpoint::kClientStatesFile).string());
  }
  const fs::path index_file = c.folder / checkpoint::kIndexFile;
  if (c.index.sections.contains("faults")) {
    // Read into a scratch membership: what train_run restores after this.
    Membership scratch(run.m, c.index.step, setup.plugins.round_steps, nullptr,
                       run.m.has_population() ? std::make_shared<data::ClientSlots>(run.m.nodes) : nullptr);
    try {
      scratch.restore(c.index.sections.at("faults"));
    } catch (const json::exception& e) {
      throw sdk::DataError(index_file.string() + ": sections.faults: " + util::without_json_prefix(e.what()));
    }
  }
  if (!run.role.writes) return;
  check_csvs(run_dir, c.index, index_file);
  restore_outputs(reported, c.index.sections.at("outputs"), index_file);
}

}  // namespace

void load_resume_point(const RunContext& run, const TrainingSetup& setup, const json& config,
                       sim::ClockExchange& clocks, CheckpointState& checkpoints, ReportedResults& reported,
                       const TrainingOptions& options) {
  const manifest::Manifest& m = run.m;
  const dist::NodeBlock& block = run.role.block;
  std::optional<checkpoint::LoadedCheckpoint>& resume = checkpoints.resume;
  const auto fits = [&](checkpoint::LoadedCheckpoint& c) { check_fits(run, setup, reported, options.run_dir, c); };
  resume = checkpoint::find_checkpoint(options.run_dir, options.from_step, block.first, block.count, *run.log, fits);
  if (run.role.mesh) {
    // Each process checked only its own nodes' files: all take the oldest
    // step any of them could load.
    int64_t oldest = resume->index.step;
    for (const auto& step : run.role.mesh->all_gather_text(std::to_string(oldest)))
      oldest = std::min<int64_t>(oldest, std::stoll(step));
    if (oldest != resume->index.step)
      resume = checkpoint::find_checkpoint(options.run_dir, oldest, block.first, block.count, *run.log, fits);
  }
  const checkpoint::CheckpointIndex& index = resume->index;
  const fs::path index_file = resume->folder / checkpoint::kIndexFile;
  check_plugins(setup.plugins, index, index_file);
  if (auto d = checkpoint::first_difference(index.settings, checkpoint::exact_settings(config))) {
    std::string changeable;
    for (const auto& field : checkpoint::changeable_fields()) changeable += (changeable.empty() ? "" : ", ") + field;
    throw sdk::ConfigError(
        d->path, "was " + sdk::json_excerpt(d->before) + " when the checkpoint of step " + std::to_string(index.step) +
                     " was written, now " + sdk::json_excerpt(d->after) +
                     "; a resumed run must keep it to continue exactly (fields that may change: " + changeable + ")");
  }
  if (index.step > m.max_steps) {
    throw sdk::ConfigError("train.max_steps", std::to_string(m.max_steps) + " is before the checkpoint's step " +
                                                  std::to_string(index.step));
  }
  if (index.step == m.max_steps && fs::exists(options.run_dir / "summary.json")) {
    throw sdk::ConfigError("train.max_steps", "the run already finished its " + std::to_string(m.max_steps) +
                                                  " steps; to train further, raise it (--set train.max_steps=" +
                                                  std::to_string(2 * m.max_steps) + ")");
  }
  checkpoints.first_step = index.step;
  // Every node has taken part in the same strategy collectives.
  clocks.restore(resume->nodes.begin()->second.meter.at("sequence").get<uint64_t>());
}

void cut_outputs_to_checkpoint(const fs::path& run_dir, const checkpoint::CheckpointIndex& index) {
  for (const auto& [name, bytes] : index.sections.at("outputs").at("csv_bytes").items()) {
    std::error_code ec;
    fs::resize_file(run_dir / name, bytes.get<uintmax_t>(), ec);
    if (ec) throw sdk::Error((run_dir / name).string() + ": cannot cut back to the checkpoint: " + ec.message());
  }
  // The run is not finished any more; the end writes it again.
  std::error_code ec;
  fs::remove(run_dir / "summary.json", ec);
}

void prepare_checkpoints(const RunContext& run, const TrainingPlugins& plugins, const TrainingOutputs& outputs,
                         CheckpointState& checkpoints) {
  const manifest::Manifest& m = run.m;
  if (m.checkpoint.interval <= 0) return;
  fs::path run_dir = outputs.run_dir;
  if (run.role.mesh) {
    // Every process writes its nodes' files into process 0's run folder,
    // which must therefore be on a filesystem they share.
    run_dir = run.role.mesh->all_gather_text(outputs.run_dir.string()).front();
    if (!fs::exists(run_dir / "config.json")) {
      throw sdk::Error("checkpoints over several processes need the run folder on a filesystem they share: " +
                       run_dir.string() + " is not there on this host");
    }
  }
  checkpoints.writer = std::make_unique<checkpoint::CheckpointWriter>(run_dir, m.checkpoint.keep);
  checkpoints.stop_point = std::make_unique<checkpoint::StopPoint>(
      run.role.block.first, run.role.block.count, checkpoints.first_step, /*shared=*/run.role.mesh != nullptr);
  checkpoint::CheckpointIndex& index = checkpoints.index;
  index.nodes = m.nodes;
  index.processes = run.role.processes;
  index.abi = EXOGYM_ABI_VERSION;
  index.exogym_version = EXOGYM_VERSION;
  index.settings = checkpoint::exact_settings(outputs.config);
  index.manifest_hash = checkpoint::settings_hash(index.settings);
  index.plugins = plugins_json(plugins);
  // Resumed from an older checkpoint: the newer ones belong to a run that
  // no longer exists (its rows were cut).
  if (checkpoints.resume && run.role.writes) {
    for (const auto& [step, folder] : checkpoint::list_checkpoints(run_dir)) {
      if (step <= checkpoints.first_step) continue;
      run.log->info("removing checkpoint {}: resumed from step {}", folder.string(), checkpoints.first_step);
      fs::remove_all(folder);
    }
    checkpoints.writer->prune();
  }
}

bool checkpoint_due(const manifest::Manifest& m, const CheckpointState& checkpoints, int64_t step) {
  return checkpoints.writer && (step % m.checkpoint.interval == 0 || step == m.max_steps);
}

namespace {

std::string metrics_file_name(int process) { return "metrics-process-" + std::to_string(process) + ".json"; }

// Process 0: the rows the other processes handed over for this checkpoint
// go into metrics.csv, so that the CSV the checkpoint records is complete.
void take_over_metrics(int processes, checkpoint::CheckpointWriter& checkpoint_writer, output::RunWriter& writer,
                       int64_t step) {
  const fs::path folder = checkpoint_writer.partial_folder(step);
  for (int q = 1; q < processes; ++q) {
    const fs::path file = folder / metrics_file_name(q);
    json rows;
    try {
      std::ifstream in(file, std::ios::binary);
      if (!in) throw sdk::Error("it is missing");
      rows = json::parse(in);
    } catch (const std::exception& e) {
      throw sdk::Error(file.string() + ": cannot read the metric rows of process " + std::to_string(q) + ": " +
                       e.what());
    }
    replay_metrics(rows, writer);
    std::error_code ec;
    fs::remove(file, ec);
  }
}

}  // namespace

void hand_over_metrics(MetricBuffer& buffer, checkpoint::CheckpointWriter& checkpoint_writer, int process,
                       int64_t step) {
  const json rows = buffer.take_rows();
  util::write_file_atomically(checkpoint_writer.partial_folder(step) / metrics_file_name(process), rows.dump());
}

fs::path commit_checkpoint(const ProcessRole& role, output::RunWriter& writer, const ReportedResults& reported,
                           const Membership& membership, CheckpointState& checkpoints, int64_t step) {
  if (role.mesh) take_over_metrics(role.processes, *checkpoints.writer, writer, step);
  checkpoint::CheckpointIndex index = checkpoints.index;
  index.step = step;
  index.sections["outputs"] = outputs_section(writer, reported);
  if (membership.simulated()) index.sections["faults"] = membership.checkpoint_state(step);
  const fs::path folder = checkpoints.writer->commit(index);
  double bytes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) bytes += static_cast<double>(entry.file_size(ec));
  checkpoints.bytes = bytes;
  return folder;
}

}  // namespace exogym::runtime::train
