#include "exogym/modules/sparseloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "exogym/modules/chunk_topk.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/options.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

std::vector<std::string> SparseLoCoModule::quantize_names() {
  std::vector<std::string> names = {"none"};
  for (auto& name : sdk::quant_format_names()) names.push_back(name);
  return names;
}

sdk::ModuleSpecs SparseLoCoModule::specs() {
  return {"SparseLoCoModule",
          {
              OptionSpec{"H", OptionType::PositiveInteger, 15,
                         "inner steps per outer step: the nodes exchange their compressed pseudo-gradients after the "
                         "H-th, 2H-th, ... inner step"},
              OptionSpec{"chunk", OptionType::PositiveInteger, 4096,
                         "values per chunk: each parameter, read flat in row-major order, is cut into chunks of this "
                         "many values (the last one may be shorter); at most the largest parameter tensor's size"},
              OptionSpec{"density", OptionType::Fraction, 64.0 / 4096.0,
                         "the fraction of each chunk sent: its ceil(density * length) largest magnitudes (64 of 4096 "
                         "by default)"},
              OptionSpec{"quantize", OptionType::String, "int2",
                         "how the kept values travel: int2 (2 bits, levels +-0.5 and +-1.5 times one fp32 scale per "
                         "chunk), another low-bit format of sdk/quantize.h, or none (fp32)",
                         quantize_names()},
              OptionSpec{"decay", OptionType::Number, 0.95,
                         "beta in [0, 1]: each node's error buffer is beta * buffer + pseudo-gradient before the top-k "
                         "(0: no memory of what was not sent)"},
              OptionSpec{"outer_lr", OptionType::PositiveNumber, 1.0,
                         "alpha: the global parameters step by -alpha times the sparse average (outer SGD without "
                         "momentum)"},
          }};
}

SparseLoCoModule::SparseLoCoModule(const sdk::ModuleOptions& o)
    : H_(o.at("H").get<int64_t>()), outer_lr_(o.at("outer_lr").get<double>()) {
  format_.chunk = o.at("chunk").get<int64_t>();
  format_.density = o.at("density").get<double>();
  const std::string quant = o.at("quantize").get<std::string>();
  if (quant != "none") format_.quant = sdk::quant_format_from_name(quant, "quantize");
  const double decay = o.at("decay").get<double>();
  if (!(decay >= 0 && decay <= 1)) {
    throw sdk::ConfigError("decay",
                           "expected an error-buffer decay in [0, 1], got " + sdk::json_excerpt(o.at("decay")));
  }
  decay_ = static_cast<float>(decay);
}

SparseLoCoModule::~SparseLoCoModule() = default;

void SparseLoCoModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  ctx_ = &ctx;
  params_.clear();
  int64_t largest = 0;
  for (auto& p : sdk::trainable_parameters(model)) {
    params_.push_back(p.detach());
    largest = std::max(largest, p.numel());
  }
  // A chunk no tensor fills is a mistake (a chunk meant for another model):
  // every tensor would be one short chunk and the density would apply to
  // whole tensors.
  if (format_.chunk > largest) {
    throw sdk::ConfigError("chunk", "a chunk of " + std::to_string(format_.chunk) +
                                        " values is larger than the model's largest trainable tensor (" +
                                        std::to_string(largest) + " values): choose at most " +
                                        std::to_string(largest));
  }
  clear_errors();
  // SparseLoCo's outer step is plain SGD on the sparse average.
  const sdk::OptimizerSpec sgd =
      sdk::OptimizerSpec::from_json({{"name", "sgd"}, {"lr", outer_lr_}, {"momentum", 0.0}}, "outer_lr");
  // Every node starts from the same parameters, so the first node of the
  // process to get here makes θ for all.
  outer_ = OuterMaster::in_process(ctx, "sparseloco", params_, sgd);
}

void SparseLoCoModule::clear_errors() {
  errors_.clear();
  for (const auto& p : params_) errors_.push_back(at::zeros(p.sizes(), at::kFloat));
}

void SparseLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  if ((step + 1) % H_ != 0) return;
  // As DiLoCo: one node has nobody to average with.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  const auto& global = outer_->master();
  std::vector<SparsePayload> payloads;
  std::vector<std::vector<int64_t>> shapes;
  double error_sq = 0, kept = 0, total = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    // Δ_r in the parameters' dtype, as Streaming DiLoCo forms its outer
    // gradient, then accumulated in fp32.
    const at::Tensor delta = (global[i].detach() - params_[i]).to(at::kCPU, at::kFloat);
    at::Tensor& e = errors_[i];
    e.mul_(decay_).add_(delta);
    payloads.push_back(sparsify(e, format_));
    e.sub_(densify(payloads.back(), e.numel(), format_).view(e.sizes()));
    error_sq += e.square().sum().item<double>();
    kept += static_cast<double>(topk_count(e.numel(), format_.chunk, format_.density));
    total += static_cast<double>(e.numel());
    shapes.push_back(e.sizes().vec());
  }
  std::vector<at::Tensor> mean = sparse_mean(ctx.communicator(), payloads, shapes, format_);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = mean[i].to(global[i].device(), global[i].scalar_type());
  outer_->step(step, mean, OuterMaster::Received::PseudoGradient);
  ctx.record("pseudo_grad_norm", outer_->pseudo_grad_norm());
  ctx.record("error_norm", std::sqrt(error_sq));
  ctx.record("density_sent", kept / total);
  outer_->mix_into(params_, 0.0);
}

void SparseLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  outer_->save(out, prefix);
  for (size_t i = 0; i < errors_.size(); ++i) out[prefix + "error." + std::to_string(i)] = errors_[i];
}

void SparseLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto it = in.find(prefix + "outer_step");
  if (it == in.end()) throw sdk::Error("SparseLoCo state: missing " + prefix + "outer_step");
  outer_->load(in, prefix, it->second.item<int64_t>());
  for (size_t i = 0; i < errors_.size(); ++i) {
    const std::string key = prefix + "error." + std::to_string(i);
    auto e = in.find(key);
    if (e == in.end()) throw sdk::Error("SparseLoCo state: missing " + key);
    if (!e->second.sizes().equals(errors_[i].sizes())) {
      throw sdk::Error("SparseLoCo state: " + key + " has another shape than parameter " + std::to_string(i));
    }
    errors_[i].copy_(e->second);
  }
}

void SparseLoCoModule::recovery_state(sdk::StateDict& out, const std::string& prefix) const {
  // What a real cluster would send: θ. The step it stands at follows from
  // the step the node comes back at; the error buffers are the donor's own.
  outer_->save(out, prefix);
  out.erase(prefix + "outer_step");
}

void SparseLoCoModule::load_recovery_state(sdk::Model& /*model*/, const sdk::StateDict& in, const std::string& prefix) {
  // The donor is live, so θ stands at the last outer step before this one.
  outer_->load(in, prefix, (ctx_->step / H_) * H_ - 1);
  outer_->mix_into(params_, 0.0);
  clear_errors();
}

}  // namespace exogym::modules
