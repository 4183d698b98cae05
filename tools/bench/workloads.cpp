#include "bench/workloads.h"

namespace exogym::bench {

using nlohmann::json;

std::vector<ModelCase> model_cases(const BenchOptions& options) {
  const json mnist = mnist_data(options);
  std::vector<ModelCase> cases;
  for (const auto& name : options.models) {
    if (name == "mlp") cases.push_back(mlp_case(options));
    if (name == "cnn") cases.push_back({"cnn", json::object(), mnist, 32, 0, 20, 2});
    if (name == "nanogpt") cases.push_back(nanogpt_case(options));
  }
  return cases;
}

ModelCase nanogpt_case(const BenchOptions& options) {
  return {"nanogpt",
          {{"size", "small"}, {"block_size", 128}, {"vocab_size", 66}},
          {{"dataset", "text-char"},
           {"path", (options.data_dir / "shakespeare" / "input.txt").string()},
           {"options", {{"block_size", 128}}}},
          16,
          128,
          40,
          2};
}

ModelCase mlp_case(const BenchOptions& options) {
  return {"mlp", {{"hidden", {256}}}, mnist_data(options), 64, 0, 300, 5};
}

json training_spec(const ModelCase& model, int nodes, int64_t steps, int64_t batch_size, const std::string& strategy,
                   const json& strategy_options) {
  return {{"nodes", nodes},
          {"steps", steps},
          {"batch_size", batch_size},
          {"model", model.name},
          {"model_options", model.model_options},
          {"data", model.data},
          {"strategy", strategy},
          {"strategy_options", strategy_options}};
}

json mnist_data(const BenchOptions& options) {
  return {{"dataset", "mnist"}, {"path", (options.data_dir / "mnist").string()}};
}

json adamw_options() { return {{"optimizer", {{"name", "adamw"}, {"lr", 1e-3}}}}; }

json diloco_options() { return {{"H", 10}, {"optimizer", {{"name", "adamw"}, {"lr", 1e-3}}}}; }

double state_bytes(int64_t parameters, int optimizer_tensors, bool gradients) {
  return 4.0 * static_cast<double>(parameters) * ((gradients ? 2 : 1) + optimizer_tensors);
}

}  // namespace exogym::bench
