// Strategy "demo": Decoupled Momentum optimization (DeMo, Peng et al. 2024;
// bloc97/DeMo as the reference uses it). Each node keeps a momentum buffer δ
// of its own gradients, sends only the top-k DCT coefficients of δ per chunk,
// keeps the untransmitted residual, and every node steps along the sign of
// the decoded average of what all nodes sent (sign-SGD), so replicas stay
// identical while each step communicates a small fraction of the parameters.
//
// δ is kept in the DCT domain: the transform is linear and orthonormal, so
// DCT(decay·δ + lr·g) = decay·DCT(δ) + lr·DCT(g), and taking the sent
// coefficients out of DCT(δ) is the reference's δ - decode(sent). A node
// then encodes only its gradient each step and never decodes: the one
// decode left, of the nodes' average, is done once per process.
//
// With participation δ is the client's own (Strategy::has_client_state).
//
// Fixes over the reference: lr is an option (it was stuck at 1e-3), max_norm
// clips the local gradient (it was ignored), convolution kernels and 0-D
// parameters are transformed (flattened to 2-D / treated as 1-D; they
// crashed), a parameter without a gradient counts as a zero gradient (it
// crashed), and the average of the received coefficients is deterministic.
#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <torch/nn/module.h>

#include <memory>
#include <mutex>
#include <string>

#include "demo/dct.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/shared.h"
#include "exogym/sdk/strategy.h"

namespace exogym::plugins {

namespace demo = modules::demo;

using sdk::OptionSpec;
using sdk::OptionType;

static sdk::OptionSpecs demo_options() {
  return {
      OptionSpec{"compression_decay", OptionType::NonNegativeNumber, 0.999,
                 "decay of the momentum buffer δ each step (0 <= x < 1): δ <- decay·δ + lr·grad"},
      OptionSpec{"compression_topk", OptionType::PositiveInteger, 32,
                 "DCT coefficients sent per chunk (a 1-D chunk, or a 2-D tile of a matrix), largest magnitude first; "
                 "at most the chunk's size"},
      OptionSpec{"compression_chunk", OptionType::PositiveInteger, 64,
                 "target chunk length: each dimension is cut into chunks of its largest divisor <= this"},
      OptionSpec{"weight_decay", OptionType::NonNegativeNumber, 0.0,
                 "decoupled weight decay: p <- p·(1 - lr·weight_decay) before each step"},
      OptionSpec{"lr", OptionType::PositiveNumber, 1e-3,
                 "learning rate of the sign-SGD step (and the scale of the gradient added to δ)"},
      OptionSpec{"lr_schedule", OptionType::LrSchedule, "constant",
                 "learning-rate schedule (constant, cosine, linear)"},
      OptionSpec{"max_norm", OptionType::PositiveNumber, nullptr,
                 "clip each node's local gradient to this global L2 norm before the DeMo step (null: no clipping)"},
  };
}

class DemoStrategy final : public sdk::Strategy {
 public:
  explicit DemoStrategy(const nlohmann::json& options)
      : decay_(options.at("compression_decay").get<double>()),
        topk_(options.at("compression_topk").get<int64_t>()),
        weight_decay_(options.at("weight_decay").get<double>()),
        base_lr_(options.at("lr").get<double>()),
        schedule_(sdk::LrSchedule::from_json(options.at("lr_schedule"), "lr_schedule")),
        max_norm_(options.at("max_norm").is_null() ? 0.0 : options.at("max_norm").get<double>()),
        transform_(options.at("compression_chunk").get<int64_t>()) {
    if (!(decay_ < 1.0))
      throw sdk::ConfigError("compression_decay",
                             "expected a number in [0, 1), got " + options.at("compression_decay").dump());
  }

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    for (auto& item : model.network().named_parameters(/*recurse=*/true)) {
      if (!item.value().requires_grad()) continue;
      names_.push_back(item.key());
      params_.push_back(item.value());
      const at::Tensor& p = item.value();
      deltas_.push_back(p.numel() == 0 ? at::empty({0}, p.options())
                                       : at::zeros(transform_.encoded_shape(p.sizes()), p.options()));
    }
    lr_ = base_lr_ * schedule_.factor(0, ctx.max_steps);
    shared_ = sdk::shared_in_process<Shared>(ctx, "demo", [] { return std::make_shared<Shared>(); });
  }

  void zero_grad() override {
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().reset();
  }

  void step() override {
    at::NoGradGuard no_grad;
    lr_ = base_lr_ * schedule_.factor(ctx_->step, ctx_->max_steps);
    if (max_norm_ > 0) ctx_->record("grad_norm", sdk::clip_grad_norm(params_, max_norm_));

    // Local half: update δ, pick what to send, keep the residual.
    std::vector<at::Tensor> message;  // idx_0, val_0, idx_1, val_1, ...
    std::vector<std::vector<int64_t>> encoded_shapes(params_.size());
    message.reserve(2 * params_.size());
    double dense_bytes = 0, sent_bytes = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& p = params_[i];
      if (weight_decay_ != 0) p.mul_(1.0 - lr_ * weight_decay_);
      if (p.numel() == 0) continue;
      // No gradient: g = 0.
      demo::Compressed sent = transform_.accumulate_and_extract(deltas_[i], p.grad(), decay_, lr_, topk_);
      encoded_shapes[i] = deltas_[i].sizes().vec();
      dense_bytes += static_cast<double>(p.numel() * p.element_size());
      sent_bytes +=
          static_cast<double>(sent.idx.numel() * sent.idx.element_size() + sent.val.numel() * sent.val.element_size());
      message.push_back(sent.idx);
      message.push_back(sent.val);
    }
    // Bytes of the dense update over the bytes this node sends (indices
    // included): how much the DCT top-k compresses.
    if (sent_bytes > 0) ctx_->record("compression_ratio", dense_bytes / sent_bytes);

    // One all-gather for every parameter's indices and values.
    std::vector<std::vector<at::Tensor>> gathered = ctx_->communicator().all_gather(message);

    // Shared half: every node decodes the same average and takes the same
    // sign step, so the first node of the process to get here decodes it
    // for all (sdk/shared.h). The others take the tensors' handles under
    // the lock: the next step's update replaces them only after every node
    // has gathered again.
    std::vector<at::Tensor> update;
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      if (shared_->step != ctx_->step) {
        shared_->update = decoded_update(gathered, encoded_shapes);
        shared_->step = ctx_->step;
      }
      update = shared_->update;
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].numel() > 0) params_[i].add_(update[i], -lr_);  // plain SGD: no momentum, no weight decay
    }
  }

  double lr() const override { return lr_; }

  // δ as kept, in the DCT domain (dct.h's layout), so that a resumed run
  // continues bit for bit.
  void save_state(sdk::StateDict& out) const override {
    for (size_t i = 0; i < params_.size(); ++i) out["delta_dct." + names_[i]] = deltas_[i];
  }

  // Also reads the parameter-shaped "delta.<name>" of checkpoints written
  // before δ was kept encoded.
  void load_state(const sdk::StateDict& in) override {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (auto it = in.find("delta_dct." + names_[i]); it != in.end()) {
        deltas_[i].copy_(checked_shape(it->first, it->second, deltas_[i].sizes()));
      } else if (auto old = in.find("delta." + names_[i]); old != in.end() && params_[i].numel() > 0) {
        const at::Tensor& delta = checked_shape(old->first, old->second, params_[i].sizes());
        deltas_[i].copy_(transform_.encode(delta.to(deltas_[i].options())));
      }
    }
  }

  // A node that comes back takes the parameters (the same on every node)
  // and starts with an empty momentum buffer: δ is the residual of its own
  // gradients, which a restarted machine has lost, and the donor's would
  // count the donor's residual twice.
  void recovery_state(sdk::Model& model, sdk::StateDict& out) const override { sdk::save_model_tensors(model, out); }

  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in) override {
    sdk::load_model_tensors(model, in);
    at::NoGradGuard no_grad;
    for (auto& delta : deltas_) delta.zero_();
  }

  // With participation δ is the client's (Strategy::has_client_state): a
  // client drawn again finds the residual of its own gradients, on any node.
  bool has_client_state() const override { return true; }
  void save_client_state(sdk::StateDict& out) const override { save_state(out); }
  void load_client_state(const sdk::StateDict& in) override {
    at::NoGradGuard no_grad;
    for (auto& delta : deltas_) delta.zero_();
    load_state(in);
  }

 private:
  static const at::Tensor& checked_shape(const std::string& key, const at::Tensor& t, at::IntArrayRef expected) {
    if (t.sizes() != expected)
      throw sdk::Error("DeMo state: " + key + " has the shape " + c10::str(t.sizes()) + ", expected " +
                       c10::str(expected) + " (was compression_chunk changed?)");
    return t;
  }

  // The sign of the decoded average of what every node sent, per parameter
  // (undefined for an empty one).
  std::vector<at::Tensor> decoded_update(const std::vector<std::vector<at::Tensor>>& gathered,
                                         const std::vector<std::vector<int64_t>>& encoded_shapes) {
    std::vector<at::Tensor> update(params_.size());
    size_t slot = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& p = params_[i];
      if (p.numel() == 0) continue;
      std::vector<at::Tensor> idx, val;
      idx.reserve(gathered.size());
      val.reserve(gathered.size());
      for (auto& from_rank : gathered) {
        idx.push_back(from_rank.at(slot).to(p.device()));
        val.push_back(from_rank.at(slot + 1).to(p.device()));
      }
      slot += 2;
      update[i] = at::sign(transform_.decode(demo::batch_decompress(idx, val, encoded_shapes[i]), p.sizes()));
    }
    return update;
  }

  // The update of the latest step, decoded once per process.
  struct Shared {
    std::mutex mutex;
    int64_t step = -1;
    std::vector<at::Tensor> update;
  };

  double decay_;
  int64_t topk_;
  double weight_decay_;
  double base_lr_;
  sdk::LrSchedule schedule_;
  double max_norm_;
  demo::DctTransform transform_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> deltas_;
  std::shared_ptr<Shared> shared_;
  double lr_ = 0;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("demo", "1.0.0", exogym::plugins::DemoStrategy, exogym::plugins::demo_options)
