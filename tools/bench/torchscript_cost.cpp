// The "torchscript" section (docs/from-pytorch.md#speed): the MLP and the
// CNN of the overhead table as TorchScript files (written here, through
// LibTorch's own TorchScript compiler, with the layers the built-in models
// use), trained by the simulator as model "torchscript" against the
// built-in models doing the same work. DiLoCo on 4 nodes, per node (a
// TorchScript model has no stacked forward); each run in a fresh child
// process, the fastest of options.repeat.
#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/jit/api/module.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/sections.h"
#include "bench/table.h"
#include "bench/workloads.h"

namespace exogym::bench {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A module as torch.jit.script makes one: with the "training" flag that
// train() and eval() set.
torch::jit::Module script_module(const std::string& name) {
  torch::jit::Module m(name);
  m.register_attribute("training", c10::BoolType::get(), true);
  return m;
}

void add_parameter(torch::jit::Module& m, const std::string& name, at::Tensor t) {
  m.register_parameter(name, t.requires_grad_(true), /*is_buffer=*/false);
}

// The MLP 784-256-10 with LibTorch's Linear initialisation.
torch::jit::Module mlp_script() {
  torch::jit::Module m = script_module("Mlp");
  add_parameter(m, "w0", at::randn({256, 784}) * 0.035);
  add_parameter(m, "b0", at::zeros({256}));
  add_parameter(m, "w1", at::randn({10, 256}) * 0.06);
  add_parameter(m, "b1", at::zeros({10}));
  m.define(R"(
def forward(self, input):
    x = torch.relu(torch.linear(input.reshape([input.size(0), 784]), self.w0, self.b0))
    return torch.linear(x, self.w1, self.b1)
)");
  return m;
}

// The reference's CNN as models/cnn/cnn.cpp builds it (1,868,234
// parameters): two blocks of [conv 3x3, batch norm, ReLU] twice, max pool,
// channel dropout 0.25; then Linear 6272 -> 256, ReLU, dropout 0.5, Linear.
torch::jit::Module cnn_script() {
  torch::jit::Module m = script_module("Cnn");
  int64_t in = 1;
  int conv = 0;
  for (int64_t out : {64, 128}) {
    for (int i = 0; i < 2; ++i, ++conv, in = out) {
      const std::string c = std::to_string(conv);
      add_parameter(m, "conv" + c + "_w", at::randn({out, in, 3, 3}) * 0.05);
      add_parameter(m, "conv" + c + "_b", at::zeros({out}));
      add_parameter(m, "bn" + c + "_w", at::ones({out}));
      add_parameter(m, "bn" + c + "_b", at::zeros({out}));
      m.register_buffer("bn" + c + "_mean", at::zeros({out}));
      m.register_buffer("bn" + c + "_var", at::ones({out}));
    }
  }
  add_parameter(m, "fc1_w", at::randn({256, 6272}) * 0.01);
  add_parameter(m, "fc1_b", at::zeros({256}));
  add_parameter(m, "fc2_w", at::randn({10, 256}) * 0.06);
  add_parameter(m, "fc2_b", at::zeros({10}));
  m.define(R"(
def layer(self, x, w, b, g, beta, mean, var):
    x = torch.conv2d(x, w, b, [1, 1], [1, 1])
    return torch.relu(torch.batch_norm(x, g, beta, mean, var, self.training, 0.1, 1e-5, True))

def forward(self, input):
    x = input.reshape([input.size(0), 1, 28, 28])
    x = self.layer(x, self.conv0_w, self.conv0_b, self.bn0_w, self.bn0_b, self.bn0_mean, self.bn0_var)
    x = self.layer(x, self.conv1_w, self.conv1_b, self.bn1_w, self.bn1_b, self.bn1_mean, self.bn1_var)
    x = torch.feature_dropout(torch.max_pool2d(x, [2, 2]), 0.25, self.training)
    x = self.layer(x, self.conv2_w, self.conv2_b, self.bn2_w, self.bn2_b, self.bn2_mean, self.bn2_var)
    x = self.layer(x, self.conv3_w, self.conv3_b, self.bn3_w, self.bn3_b, self.bn3_mean, self.bn3_var)
    x = torch.feature_dropout(torch.max_pool2d(x, [2, 2]), 0.25, self.training)
    x = torch.dropout(torch.relu(torch.linear(x.flatten(1), self.fc1_w, self.fc1_b)), 0.5, self.training)
    return torch.linear(x, self.fc2_w, self.fc2_b)
)");
  return m;
}

double steps_per_second(const BenchOptions& o, json spec) {
  spec["kind"] = "simulator";
  spec["execution"] = "per_node";
  double best = 0;
  for (int i = 0; i < o.repeat; ++i)
    best = std::max(best, spec["steps"].get<double>() / measure(o, spec)["loop_seconds"].get<double>());
  return best;
}

}  // namespace

json torchscript_section(const BenchOptions& o) {
  std::cout << "TorchScript models against the built-in ones: DiLoCo (H = 10, AdamW), 4 nodes per node, steps per "
               "second";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  const fs::path dir = fs::temp_directory_path() / ("exogym-bench-torchscript-" + std::to_string(getpid()));
  fs::create_directories(dir);
  json out = json::array();
  std::vector<std::vector<std::string>> table;
  for (const ModelCase& model : {mlp_case(o), ModelCase{"cnn", json::object(), mnist_data(o), 32, 0, 20, 2}}) {
    const fs::path file = dir / (model.name + ".pt");
    (model.name == "mlp" ? mlp_script() : cnn_script()).save(file.string());
    const int64_t steps = o.quick ? model.steps_quick : model.steps_full;
    json spec = training_spec(model, 4, steps, model.batch_size, "diloco", diloco_options());
    const double builtin = steps_per_second(o, spec);
    spec["model"] = "torchscript";
    spec["model_options"] = {{"path", file.string()}};
    const double script = steps_per_second(o, spec);
    out.push_back({{"model", model.name},
                   {"builtin_steps_per_second", builtin},
                   {"torchscript_steps_per_second", script},
                   {"builtin_over_torchscript", builtin / script}});
    table.push_back({model.name, fmt(builtin, 1), fmt(script, 1), fmt(builtin / script, 2)});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  print_table({"model", "built-in steps/s", "torchscript steps/s", "built-in/torchscript"}, table);
  return out;
}

}  // namespace exogym::bench
