#pragma once
// A run's outputs (outputs.h): process 0 writes the run folder; the other
// processes keep their nodes' metrics and reports for it.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "exogym/runtime/output/folder_lock.h"
#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/train/metric_buffer.h"
#include "exogym/runtime/train/report_relay.h"
#include "exogym/sdk/node.h"

namespace exogym::runtime::train {

// The members are destroyed in the reverse of their order: folder_lock,
// held while this process writes run_dir (output/folder_lock.h), comes
// before what writes, so that it is released after them.
struct TrainingOutputs {
  std::filesystem::path run_dir;
  nlohmann::json config;  // config.json's contents
  std::unique_ptr<output::FolderLock> folder_lock;
  std::unique_ptr<output::RunWriter> writer;
  std::unique_ptr<MetricBuffer> metric_buffer;
  std::unique_ptr<ReportRelay> relay;  // the other processes' (reports.h)
  std::unique_ptr<output::Progress> progress;

  // Where nodes record their metrics (sdk::NodeContext::metrics).
  sdk::MetricSink* metric_sink() const {
    return writer ? static_cast<sdk::MetricSink*>(writer.get()) : metric_buffer.get();
  }
};

}  // namespace exogym::runtime::train
