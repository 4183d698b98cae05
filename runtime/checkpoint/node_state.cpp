#include "exogym/runtime/checkpoint/node_state.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "exogym/runtime/checkpoint/state_digest.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

// Version 2: the digest covers the whole file, not only the tensor data.
const char* const kNodeStateFormat = "exogym-node-state-2";
const char* const kDigest = kDigestKey;
const std::string kModel = "model.", kBuffer = "buffer.", kStrategy = "strategy.", kAsync = "async.",
                  kGenerator = "rng.model";

at::Tensor on_cpu(const at::Tensor& tensor) { return tensor.detach().to(at::kCPU).contiguous(); }

const at::Tensor* find(const output::NamedTensors& tensors, const std::string& name) {
  for (const auto& [key, tensor] : tensors)
    if (key == name) return &tensor;
  return nullptr;
}

// The saved tensor for `target`: sdk::DataError naming `what` (the file) and
// the tensor when it is missing or its shape or dtype differs (copy_ would
// convert a dtype silently).
const at::Tensor& matching(const at::Tensor& target, const output::NamedTensors& tensors, const std::string& name,
                           const std::string& what) {
  const at::Tensor* saved = find(tensors, name);
  if (!saved) throw sdk::DataError(what + ": no tensor \"" + name + "\" (a checkpoint of another model?)");
  if (saved->sizes() != target.sizes())
    throw sdk::DataError(what + ": \"" + name + "\" has shape " + sdk::shape_of(*saved) + ", the model's is " +
                         sdk::shape_of(target));
  if (saved->scalar_type() != target.scalar_type())
    throw sdk::DataError(what + ": \"" + name + "\" has dtype " + c10::toString(saved->scalar_type()) +
                         ", the model's is " + c10::toString(target.scalar_type()));
  return *saved;
}

}  // namespace

std::string node_file_name(int rank) { return "node-" + std::to_string(rank) + ".safetensors"; }

void write_node_state(const fs::path& folder, int rank, int64_t step, sdk::Model& model, const sdk::Strategy& strategy,
                      const nlohmann::json& meter, const AsyncPart& async) {
  output::NamedTensors tensors;
  for (const auto& item : model.network().named_parameters(/*recurse=*/true))
    tensors.emplace_back(kModel + item.key(), on_cpu(item.value()));
  for (const auto& item : model.network().named_buffers(/*recurse=*/true))
    tensors.emplace_back(kBuffer + item.key(), on_cpu(item.value()));
  if (model.generator().defined()) {
    at::Generator generator = model.generator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    tensors.emplace_back(kGenerator, generator.get_state());
  }
  sdk::StateDict strategy_state;
  strategy.save_state(strategy_state);
  for (const auto& [key, tensor] : strategy_state) tensors.emplace_back(kStrategy + key, on_cpu(tensor));
  for (const auto& [key, tensor] : async.tensors) tensors.emplace_back(kAsync + key, on_cpu(tensor));

  std::map<std::string, std::string> metadata = {{"format", kNodeStateFormat},
                                                 {"node", std::to_string(rank)},
                                                 {"step", std::to_string(step)},
                                                 {"meter", meter.dump()}};
  if (!async.meta.is_null()) metadata["async"] = async.meta.dump();
  metadata[kDigest] = state_digest(tensors, metadata);
  output::write_safetensors(folder / node_file_name(rank), tensors, metadata);
  if (verify_after_writing()) {
    try {
      read_node_state(folder, rank, step);
    } catch (const sdk::DataError& e) {
      throw sdk::Error(std::string("a checkpoint read back right after it was written: ") + e.what() +
                       " (a bug: its state changed while it was written)");
    }
  }
}

bool verify_after_writing() {
  static const bool verify = [] {
    const char* setting = std::getenv("EXOGYM_VERIFY_CHECKPOINTS");
    return setting && std::string(setting) == "1";
  }();
  return verify;
}

NodeState read_node_state(const fs::path& folder, int rank, int64_t step) {
  const fs::path file = folder / node_file_name(rank);
  if (!fs::exists(file)) throw sdk::DataError(file.string() + ": missing");
  NodeState state;
  state.file = output::read_safetensors(file);
  const auto& meta = state.file.metadata;
  auto field = [&](const char* key) {
    auto it = meta.find(key);
    if (it == meta.end()) throw sdk::DataError(file.string() + ": not an ExoGym node state (no \"" + key + "\")");
    return it->second;
  };
  if (field("format") != kNodeStateFormat)
    throw sdk::DataError(file.string() + ": unknown node state format \"" + field("format") + "\"");
  if (field("node") != std::to_string(rank) || field("step") != std::to_string(step))
    throw sdk::DataError(file.string() + ": holds node " + field("node") + " at step " + field("step") +
                         ", expected node " + std::to_string(rank) + " at step " + std::to_string(step));
  if (field(kDigest) != state_digest(state.file.tensors, meta))
    throw sdk::DataError(file.string() + ": damaged (its tensors or metadata do not match its digest)");
  try {
    state.meter = nlohmann::json::parse(field("meter"));
    if (meta.count("async")) state.async.meta = nlohmann::json::parse(meta.at("async"));
  } catch (const nlohmann::json::exception& e) {
    throw sdk::DataError(file.string() + ": metadata \"meter\" or \"async\": not JSON (" + e.what() + ")");
  }
  for (const auto& [key, tensor] : state.file.tensors)
    if (key.compare(0, kAsync.size(), kAsync) == 0) state.async.tensors.emplace(key.substr(kAsync.size()), tensor);
  return state;
}

void check_model_fits(sdk::Model& model, const NodeState& state, const std::string& what) {
  const auto& tensors = state.file.tensors;
  for (const auto& item : model.network().named_parameters(/*recurse=*/true))
    matching(item.value(), tensors, kModel + item.key(), what);
  for (const auto& item : model.network().named_buffers(/*recurse=*/true))
    matching(item.value(), tensors, kBuffer + item.key(), what);
  const at::Tensor* generator = find(tensors, kGenerator);
  if (generator && model.generator().defined() && generator->scalar_type() != at::kByte)
    throw sdk::DataError(what + ": \"" + kGenerator + "\" is not a generator's state (dtype " +
                         c10::toString(generator->scalar_type()) + ")");
}

void restore_model(sdk::Model& model, const NodeState& state, const std::string& what) {
  at::NoGradGuard no_grad;
  const auto& tensors = state.file.tensors;
  for (auto& item : model.network().named_parameters(/*recurse=*/true))
    item.value().detach().copy_(matching(item.value(), tensors, kModel + item.key(), what));
  for (auto& item : model.network().named_buffers(/*recurse=*/true))
    item.value().detach().copy_(matching(item.value(), tensors, kBuffer + item.key(), what));
  if (const at::Tensor* saved = find(tensors, kGenerator); saved && model.generator().defined()) {
    at::Generator generator = model.generator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(*saved);
  }
}

void restore_strategy(sdk::Strategy& strategy, const NodeState& state) {
  sdk::StateDict saved;
  for (const auto& [key, tensor] : state.file.tensors)
    if (key.compare(0, kStrategy.size(), kStrategy) == 0) saved.emplace(key.substr(kStrategy.size()), tensor);
  strategy.load_state(saved);
}

}  // namespace exogym::runtime::checkpoint
