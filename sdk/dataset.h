#pragma once
// A dataset plugin: a read-only, indexable collection of examples. Exported
// with EXOGYM_DATASET_PLUGIN, it is built once per process and shared by
// every node thread, and the runtime shards it across nodes (see the
// manifest's "partition"). Exported with EXOGYM_NODE_DATASET_PLUGIN, it is
// built once per node, each node training on its own instance (the
// reference's dataset_factory(rank, num_nodes, train)).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/sdk/model.h"

namespace exogym::sdk {

struct DatasetRequest {
  std::filesystem::path path;  // resolved against the manifest's folder; may be empty
  std::string split;           // "train", "test", "val", ...
  uint64_t seed = 0;           // the run's seed
  // The dataset-plugin factory's (rank, num_nodes): this instance serves
  // nodes [first_node, first_node + local_nodes) of num_nodes (a shared
  // dataset: the nodes of the process that builds it). A plugin may load
  // only what those nodes need.
  int first_node = 0;
  int local_nodes = 1;
  int num_nodes = 1;
  // A per-node dataset's node: its training set for node `rank` (then
  // first_node = rank, local_nodes = 1). -1 for a shared dataset, and for a
  // per-node plugin's validation set, which is built once, shared by every
  // node's evaluation.
  int rank = -1;
};

// Lifetime: the plugin's factory runs on the main thread before any model
// is built, once per process for each dataset entry of the manifest (runs of
// a comparison with the same data settings share it), or for a per-node
// training set once for each node the process hosts. A DataError it throws
// is reported under "data.train.path" (or "data.val.path"), a ConfigError
// under "data.train.options.<its path>" (an empty path: "data.train.split").
class Dataset {
 public:
  virtual ~Dataset() = default;

  // The number of examples, read on the main thread after construction to
  // shard the examples and pick the validation subset.
  virtual int64_t size() const = 0;

  // The examples at `indices` (each in [0, size())), stacked into a batch.
  // Called concurrently from every node thread, for training batches and
  // (on nodes 0 and 1) evaluation batches: must not mutate shared state. An
  // exception ends the run, naming the node and the step.
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;

  // Token datasets: the tokens one example trains on (its sequence length),
  // read on the main thread after training so that the run's summary can
  // report tokens trained and tokens per second. Optional (default 0: not a
  // token dataset).
  virtual int64_t tokens_per_example() const { return 0; }
};

}  // namespace exogym::sdk
