// LocalStep::step_together (sdk/stacked_step.cpp): the local steps of a
// stack's nodes as one clipping and one optimizer step over the [K, ...]
// stacks give every node the parameters, moments and gradient norms of its
// own step, bit for bit on the CPU; the moments become rows of stacks;
// where the nodes do not stack it says why and changes nothing.
#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/local_step.h"
#include "exogym/sdk/metric_sink.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/stacked.h"
#include "tensor_model.h"
#include "testing.h"

using exogym::sdk::LocalStep;
using exogym::sdk::LocalStepOptions;
using exogym::sdk::NodeContext;
using exogym::test::same_bits;
using exogym::test::TensorModel;
using nlohmann::json;

namespace {

constexpr int kNodes = 3;

// The local step's options from a strategy's "options" object, defaults filled in.
LocalStepOptions local_step_options(const json& options) {
  return LocalStepOptions::from_json(
      exogym::sdk::validate_options(options, LocalStepOptions::specs().specs, "strategy.options"));
}

// grad_norm by node, as LocalStep records it.
class Norms final : public exogym::sdk::MetricSink {
 public:
  void record(int node, int64_t /*step*/, const std::string& name, double value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (name == "grad_norm") by_node[node].push_back(value);
  }
  std::map<int, std::vector<double>> by_node;

 private:
  std::mutex mutex_;
};

// K nodes of a three-parameter model (a matrix, a vector, a scalar) with
// their local steps; stacked, every parameter a row of a [K, ...] stack
// as stacked execution lays them out.
struct Nodes {
  std::vector<std::unique_ptr<TensorModel>> models;
  std::vector<NodeContext> contexts;
  std::vector<LocalStep> steps;
  std::vector<at::Tensor> stacks;
  Norms norms;

  Nodes(const json& options, bool stacked) : contexts(kNodes) {
    for (int k = 0; k < kNodes; ++k) {
      at::manual_seed(100 + k);
      models.push_back(std::make_unique<TensorModel>(std::vector<std::pair<std::string, at::Tensor>>{
          {"w", at::randn({5, 7})}, {"b", at::randn({7})}, {"s", at::randn({})}}));
    }
    if (stacked) {
      at::NoGradGuard no_grad;
      for (size_t p = 0; p < 3; ++p) {
        std::vector<at::Tensor> rows;
        for (auto& m : models) rows.push_back(m->param(p).detach());
        stacks.push_back(at::stack(rows));
        for (int k = 0; k < kNodes; ++k) models[k]->param(p).set_data(stacks.back().select(0, k));
      }
    }
    for (int k = 0; k < kNodes; ++k) {
      NodeContext& ctx = contexts[static_cast<size_t>(k)];
      ctx.rank = k;
      ctx.num_nodes = kNodes;
      ctx.max_steps = 10;
      ctx.metrics = &norms;
      steps.emplace_back(local_step_options(options));
    }
    for (int k = 0; k < kNodes; ++k) steps[static_cast<size_t>(k)].init(contexts[static_cast<size_t>(k)], *models[k]);
  }

  // Step t's gradients: node k's parameter p gets grads[p][k]; stacked, as
  // the rows of one stacked gradient.
  void set_gradients(int64_t t, const std::vector<at::Tensor>& grads) {
    for (auto& ctx : contexts) ctx.step = t;
    for (size_t p = 0; p < grads.size(); ++p) {
      const at::Tensor g = grads[p].clone();
      for (int k = 0; k < kNodes; ++k)
        models[k]->param(p).mutable_grad() = stacks.empty() ? g.select(0, k).clone() : g.select(0, k);
    }
  }

  std::vector<LocalStep*> all() {
    std::vector<LocalStep*> out;
    for (auto& s : steps) out.push_back(&s);
    return out;
  }
};

// Gradients for step t: node 1's large enough to be clipped, the others' not.
std::vector<at::Tensor> gradients(int64_t t) {
  at::manual_seed(7 + t);
  std::vector<at::Tensor> grads = {at::randn({kNodes, 5, 7}) * 0.05, at::randn({kNodes, 7}) * 0.05,
                                   at::randn({kNodes}) * 0.05};
  for (auto& g : grads) g.select(0, 1).mul_(100);
  return grads;
}

// Step t with the same gradients: each of `own`'s nodes by itself, all of
// `together`'s in one stacked step.
void step_both_ways(Nodes& own, Nodes& together, int64_t t) {
  own.set_gradients(t, gradients(t));
  together.set_gradients(t, gradients(t));
  for (auto& s : own.steps) s.step();
  REQUIRE(LocalStep::step_together(together.all()) == "");
  for (auto& s : together.steps)
    for (auto& p : s.parameters()) p.mutable_grad().reset();
}

// Three steps both ways; every parameter, moment and norm the same bits,
// and the stacked nodes' moments rows of stacks.
void require_same_steps(const json& options) {
  Nodes own(options, false), together(options, true);
  for (int64_t t = 0; t < 3; ++t) {
    INFO("step " << t);
    step_both_ways(own, together, t);
    for (int k = 0; k < kNodes; ++k) {
      for (size_t p = 0; p < 3; ++p) {
        INFO("node " << k << ", parameter " << p);
        CHECK(same_bits(own.models[k]->param(p), together.models[k]->param(p)));
        exogym::sdk::StateDict a, b;
        own.steps[static_cast<size_t>(k)].save_state(a, "o.");
        together.steps[static_cast<size_t>(k)].save_state(b, "o.");
        REQUIRE(a.size() == b.size());
        for (const auto& [key, value] : a) {
          INFO(key);
          CHECK(same_bits(value, b.at(key)));
        }
      }
    }
    CHECK(own.norms.by_node == together.norms.by_node);
    CHECK(own.steps[0].lr() == together.steps[0].lr());
  }
  // The stacked nodes' moments are rows of one stack: no second copy.
  exogym::sdk::StateDict first, second;
  together.steps[0].save_state(first, "o.");
  together.steps[1].save_state(second, "o.");
  for (const auto& [key, value] : first)
    if (value.dim() > 0 && value.numel() > 1) CHECK(value.is_alias_of(second.at(key)));
}

}  // namespace

TEST_CASE("stacked local steps are each node's own step bit for bit: AdamW, Adam, SGD and Muon, with clipping",
          "[stacked]") {
  SECTION("adamw, weight decay and a cosine schedule") {
    require_same_steps({{"optimizer", {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}}},
                        {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 1}}},
                        {"max_norm", 1.0}});
  }
  SECTION("adam") { require_same_steps({{"optimizer", {{"name", "adam"}, {"lr", 0.01}}}, {"max_norm", 1.0}}); }
  SECTION("sgd with Nesterov momentum and weight decay") {
    require_same_steps(
        {{"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}}},
         {"max_norm", 1.0}});
  }
  SECTION("sgd without momentum: no state") {
    require_same_steps({{"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}, {"max_norm", nullptr}});
  }
  SECTION("muon: the matrix orthogonalised node by node, the vector and scalar by its AdamW, weight decay") {
    require_same_steps({{"optimizer",
                         {{"name", "muon"},
                          {"lr", 0.02},
                          {"weight_decay", 0.1},
                          {"adamw_weight_decay", 0.01},
                          {"adamw_params", json::array()}}},
                        {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 1}}},
                        {"max_norm", 1.0}});
  }
  SECTION("muon without Nesterov") {
    require_same_steps(
        {{"optimizer", {{"name", "muon"}, {"lr", 0.02}, {"nesterov", false}, {"adamw_params", json::array()}}}});
  }
}

TEST_CASE("stacked local steps take moments loaded from a checkpoint into their stacks", "[stacked]") {
  const json options = {{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}, {"max_norm", 1.0}};
  Nodes own(options, false), together(options, true);
  for (int64_t t = 0; t < 4; ++t) {
    step_both_ways(own, together, t);
    if (t == 1) {
      // Each node's state loaded back: fresh tensors, no longer rows of a stack.
      for (auto& s : together.steps) {
        exogym::sdk::StateDict saved;
        s.save_state(saved, "o.");
        for (auto& [key, value] : saved) value = value.clone();
        s.load_state(saved, "o.");
      }
    }
  }
  for (int k = 0; k < kNodes; ++k)
    for (size_t p = 0; p < 3; ++p) CHECK(same_bits(own.models[k]->param(p), together.models[k]->param(p)));
}

TEST_CASE("local steps whose optimizers differ in state, or with a gap in the rows, step in runs, bit for bit",
          "[stacked]") {
  const json options = {{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}, {"max_norm", 1.0}};
  const auto require_same = [](Nodes& own, Nodes& together) {
    for (int k = 0; k < kNodes; ++k)
      for (size_t p = 0; p < 3; ++p) CHECK(same_bits(own.models[k]->param(p), together.models[k]->param(p)));
    CHECK(own.norms.by_node == together.norms.by_node);
  };
  SECTION("a node whose optimizer started again: a run of its own") {
    Nodes own(options, false), together(options, true);
    step_both_ways(own, together, 0);
    // Node 2's AdamW starts again (a node that came back) and counts its
    // own steps, a run after nodes 0 and 1.
    for (Nodes* nodes : {&own, &together}) {
      nodes->steps[2] = LocalStep(local_step_options(options));
      nodes->steps[2].init(nodes->contexts[2], *nodes->models[2]);
    }
    step_both_ways(own, together, 1);
    step_both_ways(own, together, 2);
    require_same(own, together);
    // Nodes 0 and 2 alone are no run: their states differ.
    together.set_gradients(3, gradients(3));
    CHECK_THAT(LocalStep::step_together({&together.steps[0], &together.steps[2]}),
               Catch::Contains("the optimizer states of the nodes' parameter 0 (in the model's order) differ"));
  }
  SECTION("a node down: the rows two apart are a run") {
    Nodes own(options, false), together(options, true);
    step_both_ways(own, together, 0);
    own.set_gradients(1, gradients(1));
    together.set_gradients(1, gradients(1));
    own.steps[0].step();
    own.steps[2].step();
    REQUIRE(LocalStep::step_together({&together.steps[0], &together.steps[2]}) == "");
    require_same(own, together);
  }
}

TEST_CASE("local steps that do not stack say why and change nothing", "[stacked]") {
  const auto unchanged = [](Nodes& nodes, const std::string& why_contains) {
    std::vector<at::Tensor> before;
    for (auto& m : nodes.models) before.push_back(m->value(0));
    const std::string why = LocalStep::step_together(nodes.all());
    CHECK_THAT(why, Catch::Contains(why_contains));
    for (int k = 0; k < kNodes; ++k) CHECK(same_bits(before[static_cast<size_t>(k)], nodes.models[k]->value(0)));
    CHECK(nodes.norms.by_node.empty());
  };
  SECTION("an optimizer that does not step stacks") {
    Nodes nodes({{"optimizer", {{"name", "rmsprop"}, {"lr", 0.01}}}}, true);
    nodes.set_gradients(0, gradients(0));
    unchanged(nodes, "the optimizer \"rmsprop\" steps no stacks");
  }
  SECTION("a node at another learning rate") {
    Nodes nodes({{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}, true);
    nodes.steps[2] = LocalStep(local_step_options({{"optimizer", {{"name", "adamw"}, {"lr", 0.02}}}}));
    nodes.steps[2].init(nodes.contexts[2], *nodes.models[2]);
    nodes.set_gradients(0, gradients(0));
    unchanged(nodes, "learning rates differ");
  }
  SECTION("a gradient the strategy replaced") {
    Nodes nodes({{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}, {"max_norm", 1.0}}, true);
    nodes.set_gradients(0, gradients(0));
    nodes.models[1]->param(0).mutable_grad() = nodes.models[1]->param(0).grad().clone();
    unchanged(nodes, "the gradients of the nodes' parameter 0 (in the model's order) are not the rows of one stack");
  }
  SECTION("parameters that are not rows of a stack") {
    Nodes nodes({{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}, false);
    nodes.set_gradients(0, gradients(0));
    unchanged(nodes, "the nodes' parameter 0 (in the model's order) are not the rows of one stack");
  }
}

TEST_CASE("stack_of_rows finds the stack of its rows, and only of its rows in order", "[stacked]") {
  const at::Tensor stack = at::arange(24, at::kFloat).view({4, 2, 3});
  const at::Tensor found = exogym::sdk::stack_of_rows({stack[0], stack[1], stack[2], stack[3]});
  REQUIRE(found.defined());
  CHECK(found.sizes() == stack.sizes());
  CHECK(found.data_ptr() == stack.data_ptr());
  const at::Tensor tail = exogym::sdk::stack_of_rows({stack[2], stack[3]});
  REQUIRE(tail.defined());
  CHECK(at::equal(tail, stack.slice(0, 2)));
  CHECK_FALSE(exogym::sdk::stack_of_rows({stack[1], stack[0]}).defined());
  CHECK(exogym::sdk::stack_of_rows({stack[0], stack[2]}).defined());  // every other row: a stack too
  CHECK_FALSE(exogym::sdk::stack_of_rows({stack[0], stack[1].clone()}).defined());
  CHECK_FALSE(exogym::sdk::stack_of_rows({stack[0], stack[1], stack[3]}).defined());
  CHECK_FALSE(exogym::sdk::stack_of_rows({stack[0].t(), stack[1].t()}).defined());
}
