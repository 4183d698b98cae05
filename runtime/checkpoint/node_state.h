#pragma once
// One node's part of a checkpoint, one safetensors file per node
// ("node-<rank>.safetensors"): its model's parameters ("model.<name>") and
// buffers ("buffer.<name>"), its model's random generator ("rng.model"), its
// strategy's state ("strategy.<key>", sdk::Strategy::save_state), and in the
// metadata its meter ("meter", sim::NodeMeter::state) and a digest of every
// tensor's name, dtype, shape and data and of the other metadata, so that a
// damaged or edited file is found before it is used.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/output/safetensors.h"

namespace exogym::sdk {
class Model;
class Strategy;
}  // namespace exogym::sdk

namespace exogym::runtime::checkpoint {

std::string node_file_name(int rank);

// The runtime's part of an asynchronous strategy's node state
// (async/async_schedule.h): tensors stored as "async.<key>", and metadata
// "async" (absent when `meta` is null).
struct AsyncPart {
  std::map<std::string, at::Tensor> tensors;
  nlohmann::json meta;
};

// Writes node `rank`'s state at `step` (steps completed) into `folder`
// (write_file_atomically). On the node's thread, at a step boundary, when
// nothing it saves can change (the nodes have met: node_run.cpp). With
// verify_after_writing(), reads the file back and throws sdk::Error if it
// does not match its digest.
void write_node_state(const std::filesystem::path& folder, int rank, int64_t step, sdk::Model& model,
                      const sdk::Strategy& strategy, const nlohmann::json& meter, const AsyncPart& async = {});

// EXOGYM_VERIFY_CHECKPOINTS=1 in the environment: every node file is read
// back once after it is written (the tests set it; a run that writes large
// checkpoints would read each twice).
bool verify_after_writing();

// A node's file, read and checked: sdk::DataError naming the file when it is
// not valid safetensors, belongs to another node or step, or its digest
// does not match its tensors and metadata.
struct NodeState {
  output::SafetensorsFile file;
  nlohmann::json meter;
  AsyncPart async;  // meta null: the run was not asynchronous
};
NodeState read_node_state(const std::filesystem::path& folder, int rank, int64_t step);

// Whether `state` fits `model`: every parameter and buffer is there with
// the model's shape and dtype. sdk::DataError naming `what` (the file) and
// the tensor otherwise. Resuming checks it before anything changes, so that
// a checkpoint that does not fit is skipped for the one before it.
void check_model_fits(sdk::Model& model, const NodeState& state, const std::string& what);

// Puts a node's state back: the model's parameters, buffers and generator
// (before the strategy's init), then the strategy's (after it). Throw
// sdk::DataError naming `what` (the file) when a tensor is missing or its
// shape differs.
void restore_model(sdk::Model& model, const NodeState& state, const std::string& what);
void restore_strategy(sdk::Strategy& strategy, const NodeState& state);

}  // namespace exogym::runtime::checkpoint
