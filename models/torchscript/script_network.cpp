#include "script_network.h"

#include <ATen/core/grad_mode.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/versions.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/version.h>

#include <map>
#include <mutex>
#include <system_error>

#include "exogym/sdk/error.h"

namespace exogym::models::torchscript {

namespace fs = std::filesystem;

namespace {

// The first line of LibTorch's message (the rest is its C++ stack).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string libtorch_version() { return TORCH_VERSION; }

// Checks that `file` is an archive of a file format this LibTorch reads, so
// that a file saved by a newer PyTorch is refused naming both versions.
void check_archive(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw sdk::ConfigError("path",
                           file.string() + ": " + (fs::exists(file, ec) ? "not a regular file" : "no such file"));
  try {
    caffe2::serialize::PyTorchStreamReader reader(file.string());
    (void)reader.version();
  } catch (const c10::Error& e) {
    const std::string message = first_line(e.what_without_backtrace());
    if (message.find("version") != std::string::npos)
      throw sdk::ConfigError("path",
                             file.string() + ": saved by a newer PyTorch than the LibTorch " + libtorch_version() +
                                 " ExoGym was built with, which reads TorchScript files of format versions up to " +
                                 std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion) + " (" + message +
                                 "); save it with PyTorch " + libtorch_version() +
                                 " or build ExoGym against a newer LibTorch (docs/from-pytorch.md#versions)");
    throw sdk::ConfigError("path", file.string() + ": not a TorchScript file (what torch.jit.save writes): " + message);
  }
}

// One load per file and process; each node's module is a deep copy.
torch::jit::Module load_copy(const fs::path& file) {
  static std::mutex mutex;
  static std::map<std::string, torch::jit::Module> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(file.string());
  if (it == loaded.end()) {
    check_archive(file);
    try {
      it = loaded.emplace(file.string(), torch::jit::load(file.string(), c10::Device(c10::kCPU))).first;
    } catch (const c10::Error& e) {
      throw sdk::ConfigError("path", file.string() + ": LibTorch " + libtorch_version() +
                                         " cannot load it: " + first_line(e.what_without_backtrace()) +
                                         " (a file saved by a newer PyTorch may use operators this LibTorch does "
                                         "not have: docs/from-pytorch.md#versions)");
    }
  }
  // Cloned without recording autograd (a clone that records it is not a
  // leaf, which no optimizer takes), then trainable where the file's are.
  const torch::jit::Module& source = it->second;
  torch::jit::Module copy;
  {
    at::NoGradGuard no_grad;
    copy = source.clone();
  }
  const auto from = source.named_parameters(/*recurse=*/true);
  auto to = copy.named_parameters(/*recurse=*/true);
  auto mine = to.begin();
  for (const auto& p : from) (*mine++).value.requires_grad_(p.value.requires_grad());
  return copy;
}

// Registers `from`'s parameters, buffers and submodules in `into`, the same
// tensors under the same names.
void mirror(torch::nn::Module& into, const torch::jit::Module& from) {
  for (const auto& p : from.named_parameters(/*recurse=*/false))
    into.register_parameter(p.name, p.value, p.value.requires_grad());
  for (const auto& b : from.named_buffers(/*recurse=*/false)) into.register_buffer(b.name, b.value);
  for (const auto& child : from.named_children()) {
    auto sub = std::make_shared<torch::nn::Module>(child.name);
    mirror(*sub, child.value);
    into.register_module(child.name, sub);
  }
}

const c10::FunctionSchema& forward_schema(const torch::jit::Module& script) {
  return script.get_method("forward").function().getSchema();
}

}  // namespace

ScriptNetwork::ScriptNetwork(const fs::path& file) : torch::nn::Module("ScriptNetwork"), script_(load_copy(file)) {
  if (!script_.find_method("forward"))
    throw sdk::ConfigError("path", file.string() + ": the TorchScript module has no forward()");
  script_.train(true);
  mirror(*this, script_);
}

c10::IValue ScriptNetwork::forward(std::vector<c10::IValue> inputs) {
  if (is_training() != script_training_) {
    script_.train(is_training());
    script_training_ = is_training();
  }
  // The graph as written, op by op, as eager PyTorch runs it: the
  // optimising executor would profile the first runs, then fuse ops
  // (LibTorch 2.x compiles fused CPU kernels with LLVM, seconds each, per
  // shape), changing the arithmetic (and so the bits) from one step to the
  // next. The switch is the calling thread's own, so it is set on every
  // thread that runs a node's forward.
  torch::jit::setGraphExecutorOptimize(false);
  return script_.forward(std::move(inputs));
}

std::vector<std::string> ScriptNetwork::argument_names() const {
  std::vector<std::string> names;
  const auto& arguments = forward_schema(script_).arguments();
  for (size_t i = 1; i < arguments.size(); ++i) names.push_back(arguments[i].name());
  return names;
}

size_t ScriptNetwork::required_arguments() const {
  size_t required = 0;
  const auto& arguments = forward_schema(script_).arguments();
  for (size_t i = 1; i < arguments.size(); ++i) required += arguments[i].default_value().has_value() ? 0 : 1;
  return required;
}

std::string ScriptNetwork::return_type() const {
  const auto& returns = forward_schema(script_).returns();
  return returns.empty() ? "None" : returns.front().type()->annotation_str();
}

bool ScriptNetwork::returns_tensor() const {
  const auto& returns = forward_schema(script_).returns();
  return returns.size() == 1 && returns.front().type()->kind() == c10::TypeKind::TensorType;
}

}  // namespace exogym::models::torchscript
