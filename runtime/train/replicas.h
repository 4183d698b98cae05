#pragma once
// Every node's model replica and strategy instance.
#include <c10/core/Device.h>

#include <memory>
#include <vector>

#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/memory_check.h"
#include "exogym/runtime/train/setup.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::train {

// Indexed by global rank; in a run over several processes only this
// process's block is filled.
struct Replicas {
  std::vector<std::shared_ptr<sdk::Model>> models;
  std::vector<std::shared_ptr<sdk::Strategy>> strategies;
};

// A ConfigError a plugin threw (from its constructor, init(), step(), ...)
// at the plugin's options in the manifest: "strategy.options.tau". A path
// that already starts there is kept.
sdk::ConfigError at_options(const manifest::PluginRef& ref, const sdk::ConfigError& e);

// Builds the replicas and strategies of the nodes in `block`, using up to
// `cores` threads. Node 0's replica, the only one whose initial weights
// matter, draws them from the run's seed. The first replica is built alone
// and measured: nodes that would not fit in `budget` are refused before the
// others are built (memory_check.h), and an allocation that fails is an
// sdk::ConfigError naming `nodes` or the model's options.
Replicas build_replicas(const manifest::Manifest& m, const TrainingPlugins& plugins,
                        const std::vector<c10::Device>& devices, const dist::NodeBlock& block, int cores,
                        const MemoryBudget& budget = {});

}  // namespace exogym::runtime::train
