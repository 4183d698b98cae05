#pragma once
// The benchmark's measurements, one function per section of its report:
// each prints its table and returns its rows as JSON.
#include <nlohmann/json.hpp>

#include "bench/options.h"

namespace exogym::bench {

// The simulator (an allreduce run, outputs and metering on) against the bare
// loop doing the same work, for each model and node count.
nlohmann::json overhead_section(const BenchOptions& options);

// The memory a dataset (a training spec's "data", workloads.h) takes in a
// process.
double dataset_bytes(const BenchOptions& options, const nlohmann::json& data);

// MLP DiLoCo at node counts growing fourfold up to options.max_nodes, and
// its memory per node beyond `dataset` bytes.
nlohmann::json node_sweep_section(const BenchOptions& options, double dataset);

// 16 MLP nodes (allreduce) at several parallelisms.
nlohmann::json parallelism_section(const BenchOptions& options);

// Checkpoints: the time one checkpoint of 16 nanoGPT-small nodes takes,
// and the share of a run's loop spent saving every 100 steps.
nlohmann::json checkpoint_section(const BenchOptions& options);

// Mixed precision: steps per second of the same DiLoCo run in fp32 and in
// bf16, for nanoGPT small (4 nodes) and the MNIST MLP (4 nodes).
nlohmann::json precision_section(const BenchOptions& options);
// 16 nanoGPT-small nodes, DiLoCo: the simulator's loop against a bare loop
// doing the same work, and its peak memory (beyond the dataset) against 16
// times what one replica takes training alone (state and one step's
// activations).
nlohmann::json nanogpt16_section(const BenchOptions& options);

// The whole exogym-run process on issue #21's small MNIST job (4 and 16
// nodes): wall time, and the run's own split of it (whole_run.cpp).
nlohmann::json whole_run_section(const BenchOptions& options);

// DeMo: the compression of one node's gradients per step against the MNIST
// MLP's forward and backward passes (demo_cost.cpp).
nlohmann::json demo_section(const BenchOptions& options);

// A population: 100 FedAvg MLP nodes resident against 100 of a million
// clients a round, time per round and peak memory (population_cost.cpp).
nlohmann::json population_section(const BenchOptions& options);

// Stacked execution: DiLoCo per node and stacked against one bare replica
// training K times the batch, MLP and nanoGPT (stacked_cost.cpp).
nlohmann::json stacked_section(const BenchOptions& options);

// TorchScript models (the MLP and the CNN) against the built-in ones,
// per node (torchscript_cost.cpp).
nlohmann::json torchscript_section(const BenchOptions& options);

// The non-finite check: one pass over a replica's parameters (what checking
// them every step would add per node), against a step of one node.
nlohmann::json nonfinite_section(const BenchOptions& options);

}  // namespace exogym::bench
