#pragma once
// What set-up made for a run (setup.h, replicas.h): read-only while the
// nodes run. Per-node vectors are indexed by global rank; in a run over
// several processes only this process's block is filled.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/train/node_stacks.h"
#include "exogym/runtime/train/replicas.h"
#include "exogym/runtime/train/setup.h"
#include "exogym/runtime/train/shared_objects.h"

namespace exogym::runtime::train {

// The members are destroyed in the reverse of their order: the replicas
// come after the plugins that made them, so that they are destroyed first;
// `shared` after the replicas, so that it lets go of the objects (whose
// code is a plugin's) before the plugins unload.
struct TrainingSetup {
  std::vector<c10::Device> devices;
  TrainingPlugins plugins;
  TrainingData data;
  int64_t accumulation = 1;  // micro-batches per step
  Replicas replicas;
  // How the nodes compute: stacked, or each on its own (node_stacks.h).
  std::unique_ptr<NodeStacks> stacks;
  // What the strategies keep once per process (sdk/shared.h).
  SharedRegistry shared;
  std::vector<std::string> metric_names;  // the model's, beyond the loss
  int64_t parameters = 0;                 // per replica
};

}  // namespace exogym::runtime::train
