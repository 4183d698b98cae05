#pragma once
// The run this process takes part in, fixed when it starts: the manifest,
// this process's role, when the run started (wall times in the result and
// the target's wall_seconds) and the log. The parts of a run read it; none
// changes it.
#include <spdlog/logger.h>

#include <chrono>
#include <memory>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/setup.h"

namespace exogym::runtime::train {

struct RunContext {
  RunContext(const manifest::Manifest& manifest, const ProcessRole& process) : m(manifest), role(process) {}

  const manifest::Manifest& m;
  const ProcessRole role;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::shared_ptr<spdlog::logger> log;
};

}  // namespace exogym::runtime::train
