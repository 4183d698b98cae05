// The "demo" measurement (child.h): one node training the model alone with
// DeMo's local half, timing per step its forward and backward passes and
// the compression of its gradients (plugins/demo/dct.h: the momentum's update
// in the DCT domain and the selection of what to send), which is what each
// node adds to a step under the "demo" strategy. The node steps along the
// sign of its own decoded message, untimed, so that its gradients and
// momentum evolve as in training.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "bench/child.h"
#include "demo/dct.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/host/block_cache.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/host/malloc_tuning.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/sdk/model.h"

namespace exogym::bench {

namespace {

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

nlohmann::json child_demo(const nlohmann::json& spec) {
  namespace demo = modules::demo;
  runtime::host::tune_malloc_for_training(runtime::host::available_cores());  // as the simulator
  runtime::host::install_block_cache();
  at::set_num_threads(1);
  auto loader = make_loader(spec);
  auto plugin = loader.load("model", spec["model"].get<std::string>(), "model.plugin", std::filesystem::current_path());
  auto model = plugin->create_model(plugin->validate(spec["model_options"], "model.options"));
  model->init_parameters();
  model->network().train();
  const auto data = load_dataset(spec);
  const int64_t steps = spec["steps"], batch = spec["batch_size"];
  const double lr = 1e-3, decay = 0.999;  // DeMo's defaults
  const int64_t topk = 32, chunk = 64;
  runtime::data::IidSampler sampler(data->size(), 1, batch, 42);
  demo::DctTransform transform(chunk);
  std::vector<at::Tensor> params, deltas;
  for (auto& p : model->network().parameters()) {
    params.push_back(p);
    deltas.push_back(at::zeros(transform.encoded_shape(p.sizes())));
  }
  std::vector<double> passes, compression;
  for (int64_t t = 0; t < steps; ++t) {
    for (auto& p : params) p.mutable_grad().reset();
    auto started = std::chrono::steady_clock::now();
    model->loss(data->get(sampler.batch_indices(0, t))).backward();
    passes.push_back(seconds_since(started));
    at::NoGradGuard no_grad;
    started = std::chrono::steady_clock::now();
    std::vector<demo::Compressed> sent;
    for (size_t i = 0; i < params.size(); ++i)
      sent.push_back(transform.accumulate_and_extract(deltas[i], params[i].grad(), decay, lr, topk));
    compression.push_back(seconds_since(started));
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor message = demo::decompress(sent[i].idx, sent[i].val, deltas[i].sizes());
      params[i].add_(at::sign(transform.decode(message, params[i].sizes())), -lr);
    }
  }
  // The first steps warm caches and the allocator up.
  const auto warm = static_cast<std::ptrdiff_t>(std::min<int64_t>(5, steps - 1));
  return {{"forward_backward_seconds", median({passes.begin() + warm, passes.end()})},
          {"compression_seconds", median({compression.begin() + warm, compression.end()})}};
}

}  // namespace exogym::bench
