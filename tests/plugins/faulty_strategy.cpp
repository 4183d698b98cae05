// A strategy that averages gradients like allreduce, but fails on one node
// at one step: the cluster must abort every node cleanly and report it. The
// failure is an exception (a std::exception, or `throw 42`), or, to test
// runs over several processes, the death of the node's whole process (exit
// or SIGKILL) or its hanging (SIGSTOP). It fails in step() unless `fail_in`
// names another entry point.
#include <ATen/ATen.h>
#include <signal.h>
#include <torch/nn/module.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace {

exogym::sdk::OptionSpecs faulty_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"fail_node", OptionType::Integer, 1, "node that throws (-1: none)"},
          OptionSpec{"fail_step", OptionType::NonNegativeInteger, 3, "step at which it throws"},
          OptionSpec{"fail_mode",
                     OptionType::String,
                     "throw",
                     "throw an exception (throw42: an int; config: an sdk::ConfigError at fail_step, as an option "
                     "check would), or end (exit), kill (SIGKILL) or stop (SIGSTOP) the node's process",
                     {"throw", "throw42", "config", "exit", "kill", "stop"}},
          OptionSpec{"fail_in",
                     OptionType::String,
                     "step",
                     "where it fails (the constructor fails on every node)",
                     {"constructor", "init", "zero_grad", "step"}},
          OptionSpec{"record", OptionType::Boolean, false,
                     "record the metrics \"probe\" = 1000 * rank + step every step, and \"gradients_held\": the "
                     "parameters that hold a gradient when zero_grad() begins"},
          OptionSpec{"lr", OptionType::PositiveNumber, 0.1, "plain SGD learning rate"}};
}

class FaultyStrategy final : public exogym::sdk::Strategy {
 public:
  explicit FaultyStrategy(const nlohmann::json& o)
      : fail_node_(o.at("fail_node").get<int>()),
        fail_step_(o.at("fail_step").get<int64_t>()),
        fail_mode_(o.at("fail_mode").get<std::string>()),
        record_(o.at("record").get<bool>()),
        fail_in_(o.at("fail_in").get<std::string>()),
        lr_(o.at("lr").get<double>()) {
    if (fail_in_ == "constructor") fail();
  }
  void init(exogym::sdk::NodeContext& ctx, exogym::sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.network().parameters();
    maybe_fail("init");
  }
  void zero_grad() override {
    maybe_fail("zero_grad");
    if (record_) {
      int held = 0;
      for (auto& p : params_) held += p.grad().defined() ? 1 : 0;
      ctx_->record("gradients_held", held);
    }
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }
  void step() override {
    maybe_fail("step");
    if (record_) ctx_->record("probe", 1000.0 * ctx_->rank + static_cast<double>(ctx_->step));
    std::vector<at::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad());
    ctx_->communicator().all_reduce(grads, exogym::sdk::ReduceOp::Avg);
    at::NoGradGuard no_grad;
    for (auto& p : params_) p.sub_(p.grad() * lr_);
  }

 private:
  void maybe_fail(const char* where) const {
    if (fail_in_ == where && ctx_->rank == fail_node_ && ctx_->step == fail_step_) fail();
  }
  void fail() const {
    if (fail_mode_ == "exit") ::_exit(3);
    if (fail_mode_ == "kill") ::raise(SIGKILL);
    if (fail_mode_ == "stop") ::raise(SIGSTOP);
    if (fail_mode_ == "throw42") throw 42;
    if (fail_mode_ == "config") throw exogym::sdk::ConfigError("fail_step", "deliberately refused for the test");
    throw std::runtime_error("deliberate failure for the test");
  }

  int fail_node_;
  int64_t fail_step_;
  std::string fail_mode_;
  bool record_;
  std::string fail_in_;
  double lr_;
  exogym::sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
};

}  // namespace

EXOGYM_STRATEGY_PLUGIN("faulty", "0.0.1", FaultyStrategy, faulty_options)
