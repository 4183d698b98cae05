#pragma once
// What the benchmark trains: the models of the overhead table and the
// strategy and data settings the sections share.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/options.h"

namespace exogym::bench {

struct ModelCase {
  std::string name;
  nlohmann::json model_options;
  nlohmann::json data;
  int64_t batch_size;
  int64_t tokens_per_example;  // 0: not a language model
  int64_t steps_full, steps_quick;
};

// The models options.models names, in that order.
std::vector<ModelCase> model_cases(const BenchOptions& options);

// The MLP (784-256-10) on MNIST, which every sweep trains.
ModelCase mlp_case(const BenchOptions& options);

// nanoGPT small (4 layers, width 128, block 128) on Tiny Shakespeare.
ModelCase nanogpt_case(const BenchOptions& options);

// A measurement (child.h) of `nodes` nodes training `model` with `strategy`;
// the caller sets its "kind".
nlohmann::json training_spec(const ModelCase& model, int nodes, int64_t steps, int64_t batch_size,
                             const std::string& strategy, const nlohmann::json& strategy_options);

// MNIST's training split, under options.data_dir.
nlohmann::json mnist_data(const BenchOptions& options);

// Strategy options: AdamW (lr 1e-3) for allreduce; DiLoCo with H = 10 and
// AdamW inside.
nlohmann::json adamw_options();
nlohmann::json diloco_options();

// Bytes of parameters + gradients + optimizer state per node (AdamW: 2
// moments); without `gradients`, what a node keeps between steps (the
// runtime releases gradients after each step).
double state_bytes(int64_t parameters, int optimizer_tensors, bool gradients = true);

}  // namespace exogym::bench
