#pragma once
// A TorchScript module (torch.jit.script(model).save(path), or
// torch.jit.trace) as the torch::nn::Module the runtime handles: a tree of
// modules that mirrors the script module's, holding the very same parameter
// and buffer tensors under the same dotted names (layer1.0.conv1.weight,
// bn1.running_mean, ...). Whatever the runtime does to the mirror's tensors
// (moves them to a device, stacks them, copies the initial broadcast or a
// checkpoint into them) the script module sees, and model.pt and
// checkpoints name the tensors as the Python module does.
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace exogym::models::torchscript {

class ScriptNetwork : public torch::nn::Module {
 public:
  // A copy of the module in `file` of its own (its own tensors). Throws
  // sdk::ConfigError at "path" naming the file when it is not a TorchScript
  // file this LibTorch reads, naming both versions when it is too new.
  explicit ScriptNetwork(const std::filesystem::path& file);

  torch::jit::Module& script() { return script_; }
  // forward(inputs...), with the script module in this module's mode.
  c10::IValue forward(std::vector<c10::IValue> inputs);
  // forward()'s argument names, without self; and how many of them have no
  // default (the fewest a call must give).
  std::vector<std::string> argument_names() const;
  size_t required_arguments() const;
  // The type forward() declares it returns, as TorchScript prints it.
  std::string return_type() const;
  bool returns_tensor() const;

 private:
  torch::jit::Module script_;
  bool script_training_ = true;
};

}  // namespace exogym::models::torchscript
