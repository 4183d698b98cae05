#pragma once
// What the parts of one run share: set-up's results (read-only while the
// nodes run), the nodes' replicas, the outputs and the simulated cluster.
// Per-node vectors are indexed by global rank; in a run over several
// processes only this process's block is filled.
#include <c10/core/Device.h>
#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/checkpoint/checkpoint_index.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/checkpoint/checkpoint_writer.h"
#include "exogym/runtime/checkpoint/stop_point.h"
#include "exogym/runtime/output/folder_lock.h"
#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/meters.h"
#include "exogym/runtime/train/metric_buffer.h"
#include "exogym/runtime/train/replicas.h"
#include "exogym/runtime/train/reports.h"
#include "exogym/runtime/train/setup.h"
#include "exogym/runtime/train/shared_objects.h"
#include "exogym/runtime/train/training_result.h"

namespace exogym::runtime::train {

// The training loop runs from the first node's first step to the last node's
// last: with fewer compute slots than nodes, node 0 may wait behind others,
// so its own times would hide part of the work. Every node notes both ends.
class LoopSpan {
 public:
  using Clock = std::chrono::steady_clock;

  void note_start();
  void note_end();
  // Whether any node of this process started its loop.
  bool started() const { return start_ != Clock::time_point{}; }
  Clock::time_point start() const { return start_; }
  Clock::time_point end() const { return end_; }

  // For benchmarks (TrainingOptions::timing_mark_step): when the first node
  // finished step `mark_step` (0-based).
  int64_t mark_step = -1;
  void note_mark();
  bool marked() const { return mark_ != Clock::time_point{}; }
  Clock::time_point mark() const { return mark_; }

 private:
  std::mutex mutex_;
  Clock::time_point start_, end_, mark_;
};

struct TrainingState {
  TrainingState(const manifest::Manifest& manifest, const ProcessRole& process) : m(manifest), role(process) {}

  const manifest::Manifest& m;
  const ProcessRole role;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::shared_ptr<spdlog::logger> log;

  // Set-up (setup.h). The replicas come after the plugins that made them, so
  // that they are destroyed first.
  std::vector<c10::Device> devices;
  TrainingPlugins plugins;
  TrainingData data;
  int64_t accumulation = 1;  // micro-batches per step
  Replicas replicas;
  // What the strategies keep once per process (sdk/shared.h); after the
  // replicas, so that it lets go of the objects (whose code is a plugin's)
  // before the plugins unload.
  SharedRegistry shared;
  std::vector<std::string> metric_names;  // the model's, beyond the loss
  int64_t parameters = 0;                 // per replica

  // Outputs: process 0 writes the run folder; the other processes keep their
  // nodes' metrics for it.
  std::filesystem::path run_dir;
  // Held while this process writes run_dir (output/folder_lock.h); declared
  // before what writes, so that it is released after them.
  std::unique_ptr<output::FolderLock> folder_lock;
  std::unique_ptr<output::RunWriter> writer;
  std::unique_ptr<MetricBuffer> metric_buffer;
  std::unique_ptr<ReportRelay> relay;  // the other processes' (reports.h)
  std::unique_ptr<output::Progress> progress;

  // This process's nodes that finished start() (the initial broadcast and
  // the strategy's init()): a run that fails before all did trained
  // nothing, and leaves no folder (outputs.h).
  std::atomic<int> nodes_started{0};

  std::unique_ptr<Meters> simulation;
  // Who is alive step by step (every node, unless the run simulates failures).
  std::unique_ptr<Membership> membership;
  LoopSpan loop;

  // Checkpoints (checkpointing.h). A resumed run starts at first_step, from
  // `resume` (each node's state is dropped once restored).
  int64_t first_step = 0;
  std::optional<checkpoint::LoadedCheckpoint> resume;
  // When checkpoint.interval > 0: the writer, where nodes stop on Ctrl-C
  // (one process only), and the index fields every checkpoint shares.
  std::unique_ptr<checkpoint::CheckpointWriter> checkpoints;
  std::unique_ptr<checkpoint::StopPoint> stop_point;
  checkpoint::CheckpointIndex checkpoint_index;
  nlohmann::json config;  // config.json's contents
  // Written by node 0 only (TrainingResult::checkpoints, ...).
  int64_t checkpoints_written = 0;
  double checkpoint_seconds = 0, checkpoint_bytes = 0;

  // Written by the reporting node in process 0 (reports.h).
  std::optional<EvalRecord> last_eval;
  std::optional<TargetHit> target_hit;
  double last_train_loss = NAN;

  // Where nodes record their metrics (sdk::NodeContext::metrics).
  sdk::MetricSink* metric_sink() const {
    return writer ? static_cast<sdk::MetricSink*>(writer.get()) : metric_buffer.get();
  }
};

}  // namespace exogym::runtime::train
