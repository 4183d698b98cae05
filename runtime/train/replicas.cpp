#include "exogym/runtime/train/replicas.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <algorithm>

#include "exogym/runtime/host/devices.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/threads/thread_plan.h"
#include "exogym/runtime/threads/work_crew.h"
#include "exogym/runtime/train/memory_check.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::train {

namespace {

// The stream of the models' own generators (dropout), one per node: "MODEL".
constexpr uint64_t kModelStream = 0x4D4F44454CULL;

std::shared_ptr<sdk::Model> build_model(const manifest::Manifest& m, const TrainingPlugins& plugins,
                                        const c10::Device& device, int rank) {
  std::shared_ptr<sdk::Model> model;
  try {
    model = plugins.model->create_model(plugins.model_options);
  } catch (const sdk::ConfigError& e) {
    throw at_options(m.model, e);
  }
  // Only node 0's draws survive the initial broadcast (sdk::Model).
  if (rank == 0) {
    try {
      model->init_parameters();
    } catch (...) {
      throw sdk::Error(plugins.model->description().file.string() + ": init_parameters of the model \"" +
                       m.model.plugin + "\" failed: " + util::current_exception_text());
    }
  }
  model->set_generator(at::detail::createCPUGenerator(sdk::derive_seed(m.seed, kModelStream, rank)));
  model->network().to(device);
  model->network().train();
  return model;
}

// An allocation that failed while building node `rank`: too wide a model if
// it was the first replica, else too many nodes.
sdk::ConfigError out_of_memory(const manifest::Manifest& m, int rank, bool first, const std::string& what) {
  if (first) {
    return sdk::ConfigError(m.model.path + ".options",
                            "the model \"" + m.model.plugin + "\" does not fit in memory: " + what);
  }
  return sdk::ConfigError("nodes", "out of memory building node " + std::to_string(rank) + " of " +
                                       std::to_string(m.nodes) + ": " + what + "; use fewer nodes or a smaller model");
}

}  // namespace

sdk::ConfigError at_options(const manifest::PluginRef& ref, const sdk::ConfigError& e) {
  const std::string options = ref.path + ".options";
  if (e.path() == options || e.path().rfind(options + ".", 0) == 0) return e;
  return sdk::ConfigError(options + (e.path().empty() ? "" : "." + e.path()), e.message());
}

// Only node 0's initial weights matter (every node starts from them through
// the initial broadcast), so the first replica is built alone from the run's
// seed and the rest in parallel. (Their random fills still take turns:
// LibTorch's global generator is locked while it fills a tensor.) The
// generator sees the same number of draws either way, so whatever uses it
// later does not depend on thread timing.
Replicas build_replicas(const manifest::Manifest& m, const TrainingPlugins& plugins,
                        const std::vector<c10::Device>& devices, const dist::NodeBlock& block, int cores,
                        const MemoryBudget& budget) {
  Replicas r;
  r.models.resize(m.nodes);
  r.strategies.resize(m.nodes);
  auto build = [&](int rank) {
    try {
      r.models[rank] = build_model(m, plugins, host::device_for_node(devices, rank), rank);
      try {
        r.strategies[rank] = plugins.strategy->create_strategy(plugins.strategy_options);
      } catch (const sdk::ConfigError& e) {
        throw at_options(m.strategy, e);
      }
    } catch (const sdk::ConfigError&) {
      throw;
    } catch (...) {
      if (util::current_exception_is_out_of_memory()) {
        throw out_of_memory(m, rank, rank == block.first, util::current_exception_text());
      }
      throw sdk::Error("node " + std::to_string(rank) +
                       ", building its model and strategy: " + util::current_exception_text());
    }
  };
  at::manual_seed(m.seed);
  // One intra-op thread here: an OpenMP team made on this thread would stay
  // alive through the run, and with more OpenMP threads than cores libgomp
  // stops spinning between parallel regions, so every node's team would
  // sleep and wake (measured: nanoGPT at K = 1, 23 000 context switches
  // instead of 230, and 10-15 % slower).
  threads::use_intra_op_threads(1);
  build(block.first);
  // The first replica is the measure of the others.
  check_memory(m, replica_bytes(*r.models[block.first]), block.count, budget);
  const int rest = block.count - 1;
  threads::WorkCrew crew(std::min(rest, std::max(1, cores)) - 1);
  crew.run(rest, [&](int64_t i) { build(block.first + 1 + static_cast<int>(i)); });
  return r;
}

}  // namespace exogym::runtime::train
