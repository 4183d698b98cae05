#include "exogym/modules/outer/streaming_diloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "exogym/modules/outer/diloco.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/quantized_comm.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

std::vector<std::string> StreamingDiLoCoModule::quantize_names() {
  std::vector<std::string> names = {"none"};
  for (auto& name : sdk::quant_format_names()) names.push_back(name);
  return names;
}

sdk::ModuleSpecs StreamingDiLoCoModule::specs() {
  sdk::OptionSpecs specs = {
      OptionSpec{"H", OptionType::PositiveInteger, 100,
                 "inner steps between two syncs of a fragment: fragment p syncs after the inner steps "
                 "t = o_p + kH, o_p = floor(p H / P)"},
      OptionSpec{"fragments", OptionType::Any, 4,
                 "the fragments: a number P (contiguous groups of parameter tensors in model order, as equal in "
                 "elements as possible); {\"count\": P, \"pattern\": \"strided\"} (layer l of the model's "
                 "numbered layers in fragment l mod P, as the paper prefers) or \"contiguous\"; or a list of "
                 "parameter name patterns, one fragment each ('*' matches anything; a tensor joins the first "
                 "pattern it matches)"},
      OptionSpec{"tau", OptionType::NonNegativeInteger, 0,
                 "overlap: what a fragment sends after step s is applied after step s + tau (0 <= tau < H)"},
      OptionSpec{"alpha", OptionType::Number, 0.0,
                 "mixing, in [0, 1]: a synced fragment becomes alpha * local + (1 - alpha) * global; 0 replaces it "
                 "by the global result, as DiLoCo does"},
      OptionSpec{"quantize", OptionType::String, "none",
                 "how outer gradients travel: none (an exact all-reduce of the parameters, as DiLoCo) or a low-bit "
                 "format (fp8, fp4, int8, ...: sdk/quantize.h, blocks of 128 values with one fp32 scale)",
                 quantize_names()},
      OptionSpec{"collective",
                 OptionType::String,
                 "reduce_scatter",
                 "with a low-bit format, how the payloads are averaged: reduce_scatter (each node averages one "
                 "chunk of every node's payload and sends it back quantised again: a ring all-reduce's bytes in "
                 "low bits, at any node count) or gather (every payload to every node: (K - 1) payloads per "
                 "node, rounded once; sdk/quantized_comm.h)",
                 {"reduce_scatter", "gather"}},
      OptionSpec{"error_feedback", OptionType::Number, 0.0,
                 "with a low-bit format: 0 sends each outer gradient as it is; a decay d in (0, 1] adds d times what "
                 "quantising the fragment's last outer gradient lost (exogym/modules/compression/error_feedback.h; 1: "
                 "plain error feedback)"},
  };
  for (auto& spec : DiLoCoModule::specs().specs) {
    if (spec.name == "outer_optimizer") specs.push_back(spec);
  }
  return {"StreamingDiLoCoModule", std::move(specs)};
}

StreamingDiLoCoModule::StreamingDiLoCoModule(const sdk::ModuleOptions& o)
    : H_(o.at("H").get<int64_t>()),
      tau_(o.at("tau").get<int64_t>()),
      alpha_(o.at("alpha").get<double>()),
      fragments_option_(o.at("fragments")),
      outer_spec_(sdk::OptimizerSpec::from_json(o.at("outer_optimizer"), "outer_optimizer",
                                                DiLoCoModule::default_outer_optimizer())) {
  if (tau_ >= H_) {
    throw sdk::ConfigError("tau", "expected an overlap below H = " + std::to_string(H_) + " inner steps, got " +
                                      std::to_string(tau_) + ": a fragment's sync must land before it sends again");
  }
  if (!(alpha_ >= 0 && alpha_ <= 1)) {
    throw sdk::ConfigError("alpha", "expected a mixing factor in [0, 1], got " + sdk::json_excerpt(o.at("alpha")));
  }
  check_fragments_option(fragments_option_, "fragments");
  const std::string format = o.at("quantize").get<std::string>();
  if (format != "none") quantizer_.emplace(sdk::quant_format_from_name(format, "quantize"), sdk::kDefaultQuantBlock);
  collective_ = sdk::quant_collective_from_name(o.at("collective").get<std::string>(), "collective");
  const double decay = o.at("error_feedback").get<double>();
  if (!(decay >= 0 && decay <= 1)) {
    throw sdk::ConfigError("error_feedback",
                           "expected 0 (off) or a decay in (0, 1], got " + sdk::json_excerpt(o.at("error_feedback")));
  }
  if (decay > 0 && !quantizer_) {
    throw sdk::ConfigError("error_feedback",
                           "error feedback keeps what quantising loses, but \"quantize\" is \"none\": choose a "
                           "low-bit format, or leave error_feedback at 0");
  }
  feedback_decay_ = static_cast<float>(decay);
}

StreamingDiLoCoModule::~StreamingDiLoCoModule() = default;

int64_t StreamingDiLoCoModule::first_send(size_t p) const {
  const int64_t offset = static_cast<int64_t>(p) * H_ / static_cast<int64_t>(cut_.size());
  return (offset == 0 ? H_ : offset) - 1;
}

void StreamingDiLoCoModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  ctx_ = &ctx;
  std::vector<std::string> names;
  std::vector<int64_t> numels;
  std::vector<at::Tensor> params;
  for (auto& [name, p] : sdk::named_trainable_parameters(model)) {
    names.push_back(name);
    numels.push_back(p.numel());
    params.push_back(p.detach());
  }
  cut_ = make_fragments(fragments_option_, names, numels, "fragments");
  fragments_.clear();
  for (const auto& indices : cut_) {
    Fragment f;
    for (size_t i : indices) f.params.push_back(params[i]);
    // Every node starts from the same parameters (the initial broadcast, or
    // a checkpoint whose masters load_state brings in), so the first node
    // to get here makes each master for all.
    f.outer = OuterMaster::in_process(ctx, "streaming_diloco", f.params, outer_spec_);
    if (feedback_decay_ > 0) f.feedback = std::make_unique<ErrorFeedback>(feedback_decay_);
    fragments_.push_back(std::move(f));
  }
}

void StreamingDiLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // As DiLoCo: one node has nobody to average with.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  // Sends first, then applies: with tau = 0 a fragment applies what it has
  // just sent, in DiLoCo's order. Every node decides from `step` alone, so
  // the collectives match.
  for (size_t p = 0; p < fragments_.size(); ++p) {
    const int64_t first = first_send(p);
    if (step >= first && (step - first) % H_ == 0) send(ctx, fragments_[p], step);
  }
  for (size_t p = 0; p < fragments_.size(); ++p) {
    Fragment& f = fragments_[p];
    if (f.pending_step >= 0 && f.pending_step + tau_ == step) apply(ctx, f, p, step);
  }
}

void StreamingDiLoCoModule::send(sdk::NodeContext& ctx, Fragment& f, int64_t step) {
  EXOGYM_CHECK_INTERNAL(f.pending_step < 0, "a fragment sends while its last sync is still in flight");
  if (!quantizer_) {
    // The average, once for the process: only the outer step reads it. The
    // parameters train on meanwhile: the collective took their values now.
    f.sync = ctx.communicator().all_reduce_async(f.params, sdk::ReduceOp::Avg);
  } else {
    // A low-bit average of parameters would lose their leading digits: the
    // outer gradient (old global minus local) is what is quantised.
    std::vector<CompressedInput> inputs;
    const auto& master = f.outer->master();
    for (size_t i = 0; i < f.params.size(); ++i) {
      const at::Tensor outer_grad = master[i].detach() - f.params[i];
      inputs.push_back(
          {f.feedback ? f.feedback->compress(i, *quantizer_, outer_grad) : quantizer_->compress(outer_grad),
           outer_grad.sizes().vec(), 0});
    }
    f.sync = compressed_mean_async(ctx.communicator(), *quantizer_, inputs, collective_);
  }
  f.pending_step = step;
}

std::vector<at::Tensor> StreamingDiLoCoModule::receive(Fragment& f) {
  std::vector<at::Tensor> received = f.sync.wait();
  // A low-bit mean arrives in fp32 on the CPU (compressor.h); the outer
  // step takes it as the parameters are.
  for (size_t i = 0; quantizer_ && i < received.size(); ++i)
    received[i] = received[i].to(f.params[i].device(), f.params[i].scalar_type());
  return received;
}

void StreamingDiLoCoModule::apply(sdk::NodeContext& ctx, Fragment& f, size_t p, int64_t step) {
  const std::vector<at::Tensor> received = receive(f);
  f.outer->step(step, received, quantizer_ ? OuterMaster::Received::PseudoGradient : OuterMaster::Received::Average);
  ctx.record("fragment", static_cast<double>(p));
  ctx.record("pseudo_grad_norm", f.outer->pseudo_grad_norm());
  ctx.record("outer_lr", f.outer->outer_lr());
  f.outer->mix_into(f.params, alpha_);
  f.pending_step = -1;
}

void StreamingDiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  for (size_t p = 0; p < fragments_.size(); ++p) {
    const Fragment& f = fragments_[p];
    const std::string at_fragment = prefix + "fragment." + std::to_string(p) + ".";
    f.outer->save(out, at_fragment);
    if (f.feedback) f.feedback->save_state(out, at_fragment + "residual.");
    if (f.pending_step < 0) continue;
    out[at_fragment + "pending_step"] = at::full({}, f.pending_step, at::kLong);
    f.sync.save(out, at_fragment + "pending.");
  }
}

void StreamingDiLoCoModule::load_fragments(const sdk::StateDict& in, const std::string& prefix,
                                           const std::vector<int64_t>& outer_steps,
                                           const std::vector<int64_t>& pending_steps) {
  for (size_t p = 0; p < fragments_.size(); ++p) {
    Fragment& f = fragments_[p];
    const std::string at_fragment = prefix + "fragment." + std::to_string(p) + ".";
    f.outer->load(in, at_fragment, outer_steps[p]);
    f.pending_step = pending_steps[p];
    // A handle the node holds is dropped: at a resume it holds none, and a
    // node back after a failure lost its transfers with it (pending.h).
    f.sync = {};
    if (f.pending_step < 0) continue;
    const std::string at_pending = at_fragment + "pending.";
    sdk::Communicator& comm = ctx_->communicator();
    const c10::Device device = f.params.front().device();
    f.sync = sdk::Pending::load(in, at_pending, comm, device);
    if (!f.sync.valid()) {
      throw sdk::Error("Streaming DiLoCo state: a sync is in flight at step " + std::to_string(f.pending_step) +
                       " but " + at_pending + "* is missing");
    }
  }
}

void StreamingDiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto step_at = [&](const std::string& key, int64_t absent) -> int64_t {
    auto it = in.find(key);
    return it == in.end() ? absent : it->second.item<int64_t>();
  };
  std::vector<int64_t> outer_steps, pending_steps;
  for (size_t p = 0; p < fragments_.size(); ++p) {
    const std::string at_fragment = prefix + "fragment." + std::to_string(p) + ".";
    const int64_t outer_step = step_at(at_fragment + "outer_step", -2);
    if (outer_step == -2) throw sdk::Error("Streaming DiLoCo state: missing " + at_fragment + "outer_step");
    outer_steps.push_back(outer_step);
    pending_steps.push_back(step_at(at_fragment + "pending_step", -1));
  }
  load_fragments(in, prefix, outer_steps, pending_steps);
  for (size_t p = 0; p < fragments_.size(); ++p) {
    if (fragments_[p].feedback) {
      fragments_[p].feedback->load_state(in, prefix + "fragment." + std::to_string(p) + ".residual.");
    }
  }
}

int64_t StreamingDiLoCoModule::last_apply_before(size_t p, int64_t step) const {
  const int64_t first_apply = first_send(p) + tau_;
  if (step - 1 < first_apply) return -1;
  return first_apply + (step - 1 - first_apply) / H_ * H_;
}

int64_t StreamingDiLoCoModule::in_flight_at(size_t p, int64_t step) const {
  const int64_t first = first_send(p);
  if (step - 1 < first) return -1;
  const int64_t last_send = first + (step - 1 - first) / H_ * H_;
  return last_send + tau_ >= step ? last_send : -1;
}

void StreamingDiLoCoModule::recovery_state(sdk::StateDict& out, const std::string& prefix) const {
  // What a real cluster would send: the masters, the outer states and what
  // is in flight. The steps they stand at follow from the step the node
  // comes back at.
  save_state(out, prefix);
  for (size_t p = 0; p < fragments_.size(); ++p) {
    const std::string at_fragment = prefix + "fragment." + std::to_string(p) + ".";
    out.erase(at_fragment + "outer_step");
    out.erase(at_fragment + "pending_step");
    // A node's residuals are its own: one that comes back starts without.
    for (auto it = out.lower_bound(at_fragment + "residual."); it != out.end();) {
      if (it->first.rfind(at_fragment + "residual.", 0) != 0) break;
      it = out.erase(it);
    }
  }
}

void StreamingDiLoCoModule::load_recovery_state(sdk::Model& /*model*/, const sdk::StateDict& in,
                                                const std::string& prefix) {
  // The donor is live, so its state stands at the step this node comes back
  // at: every sync before it applied or in flight.
  std::vector<int64_t> outer_steps, pending_steps;
  for (size_t p = 0; p < fragments_.size(); ++p) {
    outer_steps.push_back(last_apply_before(p, ctx_->step));
    pending_steps.push_back(in_flight_at(p, ctx_->step));
  }
  load_fragments(in, prefix, outer_steps, pending_steps);
  for (auto& f : fragments_) {
    f.outer->mix_into(f.params, 0.0);
    if (f.feedback) f.feedback->clear();
  }
}

}  // namespace exogym::modules
