#pragma once
// Shared by the checkpoint tests: training and resuming runs in this
// process, and comparing two run folders the way the issue defines "the
// same run": model.pt byte for byte, every CSV byte for byte (the manifests
// fix compute.step_time, so simulated times are deterministic too), and
// summary.json but for its wall-clock fields.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exogym/runtime/train/training_result.h"

namespace exogym::test {

// small_manifest(nodes) with checkpoints every `interval` steps and a fixed
// simulated step time.
nlohmann::json checkpointed_manifest(int nodes, int64_t interval);

// Every built-in strategy with options that exercise its state (momentum,
// islands, outer steps, selections, error feedback), for a small run: the
// strategies every resume and churn test goes through.
std::vector<std::pair<std::string, nlohmann::json>> builtin_strategies();

// The asynchronous built-in strategies (sdk/async.h) with rounds of 3
// steps of Adam, and a server that moves more often than once per K
// updates: the strategies the asynchronous resume tests go through.
std::vector<std::pair<std::string, nlohmann::json>> async_strategies();

// FedBuff on 3 nodes over a population of 30 clients with Dirichlet label
// shares: slots of 1 s, transfers of 150 ms each way, the clients' speeds
// drawn from the tiers `speeds`, 24 steps, checkpoints every 5.
nlohmann::json async_population_manifest(const nlohmann::json& speeds);

// DiLoCo on 6 nodes for 40 steps, checkpoints every 6, with churn on the
// simulated clock (mtbf 1 s, downtime 300 ms, a 50 ms failure timeout).
nlohmann::json timed_churn_manifest();

// Trains `manifest` (base folder run_dir's parent) quietly into `run_dir`.
runtime::train::TrainingResult train_into(const nlohmann::json& manifest, const std::filesystem::path& run_dir);

// Resumes the run in `run_dir` as exogym-run --resume does, with --set
// `overrides` and --from-step `from_step`.
runtime::train::TrainingResult resume_in(const std::filesystem::path& run_dir,
                                         const std::vector<std::string>& overrides = {},
                                         std::optional<int64_t> from_step = std::nullopt);

// REQUIREs that the two run folders hold the same run (see above).
void require_same_run(const std::filesystem::path& expected, const std::filesystem::path& actual);

}  // namespace exogym::test
