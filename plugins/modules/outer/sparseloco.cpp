#include "exogym/modules/outer/sparseloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/random.h"

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
              OptionSpec{"compressor", OptionType::String, "topk",
                         "what each node sends of its error buffer: topk (SparseLoCo: each chunk's largest "
                         "magnitudes), random_k (values at positions drawn from the run's seed), sign (one bit per "
                         "value and one scale per chunk) or quantize (every value in the \"quantize\" format)",
                         compressor_names()},
              OptionSpec{"chunk",
                         OptionType::PositiveInteger,
                         4096,
                         "values per chunk: each parameter, read flat in row-major order, is cut into chunks of this "
                         "many values (the last one may be shorter); at most the largest parameter tensor's size. "
                         "For sign and quantize, the values per scale",
                         {},
                         false,
                         static_cast<uint64_t>(std::numeric_limits<int>::max())},
              OptionSpec{"density", OptionType::Fraction, 64.0 / 4096.0,
                         "topk, random_k: the fraction of each chunk sent, ceil(density * length) values (64 of 4096 "
                         "by default)"},
              OptionSpec{"quantize", OptionType::String, "int2",
                         "how the kept values travel (topk, random_k): int2 (2 bits, levels +-0.5 and +-1.5 times "
                         "one fp32 scale per chunk), another low-bit format of sdk/quantize.h, or none (fp32); the "
                         "format of the quantize compressor",
                         quantize_names()},
              OptionSpec{"offsets",
                         OptionType::String,
                         "elias_fano",
                         "how topk sends its offsets within each chunk: elias_fano (about 2 + log2(1 / density) bits "
                         "each) or fixed (8, 16 or 32 bits, the narrowest that holds chunk - 1)",
                         {"elias_fano", "fixed"}},
              OptionSpec{"collective",
                         OptionType::String,
                         "reduce_scatter",
                         "quantize: how the nodes' low-bit payloads are averaged, reduce_scatter (a ring "
                         "all-reduce's bytes in low bits, the mean rounded twice) or gather (every payload to every "
                         "node, rounded once; sdk/quantized_comm.h). topk, random_k and sign payloads are gathered",
                         {"reduce_scatter", "gather"}},
              OptionSpec{"decay", OptionType::Number, 0.95,
                         "beta in [0, 1]: each node's error buffer is beta * buffer + pseudo-gradient before the top-k "
                         "(0: no memory of what was not sent)"},
              OptionSpec{"outer_lr", OptionType::PositiveNumber, 1.0,
                         "alpha: the global parameters step by -alpha times the sparse average (outer SGD without "
                         "momentum)"},
          }};
}

namespace {

// shared_seed's stream ("SPLOCO").
constexpr uint64_t kSeedStream = 0x53504C4F434FULL;

float checked_decay(const nlohmann::json& decay) {
  const double value = decay.get<double>();
  if (!(value >= 0 && value <= 1)) {
    throw sdk::ConfigError("decay", "expected an error-buffer decay in [0, 1], got " + sdk::json_excerpt(decay));
  }
  return static_cast<float>(value);
}

}  // namespace

SparseLoCoModule::SparseLoCoModule(const sdk::ModuleOptions& o)
    : H_(o.at("H").get<int64_t>()), outer_lr_(o.at("outer_lr").get<double>()), errors_(checked_decay(o.at("decay"))) {
  choice_.name = o.at("compressor").get<std::string>();
  choice_.chunk = o.at("chunk").get<int64_t>();
  choice_.density = o.at("density").get<double>();
  const std::string quant = o.at("quantize").get<std::string>();
  if (quant != "none") choice_.quant = sdk::quant_format_from_name(quant, "quantize");
  choice_.offsets = offset_coding_from_name(o.at("offsets").get<std::string>(), "offsets");
  compressor_ = make_compressor(choice_, "compressor", "quantize");
  collective_ = sdk::quant_collective_from_name(o.at("collective").get<std::string>(), "collective");
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
  if (choice_.chunk > largest) {
    throw sdk::ConfigError("chunk", "a chunk of " + std::to_string(choice_.chunk) +
                                        " values is larger than the model's largest trainable tensor (" +
                                        std::to_string(largest) + " values): choose at most " +
                                        std::to_string(largest));
  }
  errors_.clear();
  // SparseLoCo's outer step is plain SGD on the compressed average.
  const sdk::OptimizerSpec sgd =
      sdk::OptimizerSpec::from_json({{"name", "sgd"}, {"lr", outer_lr_}, {"momentum", 0.0}}, "outer_lr");
  // Every node starts from the same parameters, so the first node of the
  // process to get here makes θ for all.
  outer_ = OuterMaster::in_process(ctx, "sparseloco", params_, sgd);
}

uint64_t SparseLoCoModule::shared_seed(int64_t outer_step, size_t i) const {
  return sdk::derive_seed(ctx_->seed, kSeedStream,
                          static_cast<uint64_t>(outer_step) * params_.size() + static_cast<uint64_t>(i));
}

void SparseLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  if ((step + 1) % H_ != 0) return;
  // As DiLoCo: one node has nobody to average with.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  const auto& global = outer_->master();
  const int64_t outer_step = (step + 1) / H_ - 1;
  std::vector<CompressedInput> inputs;
  double error_sq = 0, sent = 0, dense = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    // Δ_r in the parameters' dtype, as Streaming DiLoCo forms its outer
    // gradient; the error buffer accumulates it in fp32.
    const at::Tensor delta = global[i].detach() - params_[i];
    CompressedInput in;
    in.shared_seed = shared_seed(outer_step, i);
    in.shape = delta.sizes().vec();
    in.payload = errors_.compress(i, *compressor_, delta, in.shared_seed);
    error_sq += errors_.residual(i).square().sum().item<double>();
    sent += static_cast<double>(in.payload.bytes());
    dense += 4.0 * static_cast<double>(delta.numel());
    inputs.push_back(std::move(in));
  }
  std::vector<at::Tensor> mean = compressed_mean(ctx.communicator(), *compressor_, inputs, collective_);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = mean[i].to(global[i].device(), global[i].scalar_type());
  outer_->step(step, mean, OuterMaster::Received::PseudoGradient);
  ctx.record("pseudo_grad_norm", outer_->pseudo_grad_norm());
  ctx.record("error_norm", std::sqrt(error_sq));
  ctx.record("compression_ratio", dense / sent);
  outer_->mix_into(params_, 0.0);
}

void SparseLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  outer_->save(out, prefix);
  errors_.save_state(out, prefix + "error.");
}

void SparseLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto it = in.find(prefix + "outer_step");
  if (it == in.end()) throw sdk::Error("SparseLoCo state: missing " + prefix + "outer_step");
  outer_->load(in, prefix, it->second.item<int64_t>());
  load_errors(in, prefix);
}

void SparseLoCoModule::load_errors(const sdk::StateDict& in, const std::string& prefix) {
  errors_.load_state(in, prefix + "error.");
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor e = errors_.residual(i);
    if (e.defined() && !e.sizes().equals(params_[i].sizes())) {
      throw sdk::Error("SparseLoCo state: " + prefix + "error." + std::to_string(i) +
                       " has another shape than parameter " + std::to_string(i));
    }
  }
}

void SparseLoCoModule::save_client_state(sdk::StateDict& out, const std::string& prefix) const {
  errors_.save_state(out, prefix + "error.");
}

void SparseLoCoModule::load_client_state(const sdk::StateDict& in, const std::string& prefix) {
  load_errors(in, prefix);
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
  errors_.clear();
}

}  // namespace exogym::modules
