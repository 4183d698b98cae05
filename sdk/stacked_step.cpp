// The local steps of a stack's nodes at once (LocalStep::step_together,
// stacked.h): one clipping and one optimizer step over the [K, ...] stacks
// where K nodes would take K of each, each node's results its own step's.
//
// The optimizers that stack are the elementwise ones (AdamW, Adam, SGD):
// every element of a stack goes through the operations it goes through in
// its node's own step, so the parameters and moments are the per-node
// step's bits; and Muon, elementwise but for Newton-Schulz, which takes each
// node's matrix by itself on the CPU (the same bits) and all of them in one
// batched product per iteration on a GPU (internal/muon.h). The nodes'
// moments become rows of stacks too (internal/stacked_moments.h): each
// node's optimizer state holds views of them, so checkpoints, DES-LOC's
// averages of the moments and the nodes' own steps see their own tensors.
// A node whose moments are not rows of a stack (loaded from a checkpoint,
// or after a step of its own) has them copied into one first.
//
// Runs. The nodes step in runs of consecutive rows whose optimizer states
// agree (each parameter's moments present or not, the same step count): a
// node down leaves a gap in the rows, and one whose optimizer started again
// (a node that came back) counts its own steps; each run is one step over
// its rows, the others' bits untouched. Nodes of which no two make a run
// are refused (their steps are their own).
//
// Clipping: on the CPU each node's norm is its own clip_grad_norm call,
// bit for bit; on a GPU the norms of all nodes are reductions over the
// stacks' rows, whose summation order may differ from a whole tensor's
// (docs/performance.md#where-stacked-rounding-differs), and the gradients
// are scaled by one multiplication per stack.
#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/internal/optim_state_key.h"
#include "exogym/sdk/internal/stacked_moments.h"
#include "exogym/sdk/local_step.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/stacked.h"

namespace exogym::sdk {

at::Tensor stack_of_rows(const std::vector<at::Tensor>& rows) {
  if (rows.empty()) return {};
  const at::Tensor& first = rows.front();
  if (!first.defined() || !first.is_contiguous()) return {};
  const int64_t n = first.numel();
  const int64_t distance = rows.size() > 1 && rows[1].defined() ? rows[1].storage_offset() - first.storage_offset() : n;
  if (distance < n) return {};
  for (size_t k = 0; k < rows.size(); ++k) {
    const at::Tensor& row = rows[k];
    if (!row.defined() || !row.is_alias_of(first) || row.sizes() != first.sizes() || !row.is_contiguous() ||
        row.scalar_type() != first.scalar_type() ||
        row.storage_offset() != first.storage_offset() + static_cast<int64_t>(k) * distance)
      return {};
  }
  std::vector<int64_t> sizes{static_cast<int64_t>(rows.size())}, strides{distance};
  for (int64_t d = 0; d < first.dim(); ++d) {
    sizes.push_back(first.size(d));
    strides.push_back(first.stride(d));
  }
  at::NoGradGuard no_grad;
  return at::empty({0}, first.options()).set_(first.storage(), first.storage_offset(), sizes, strides);
}

namespace {

using internal::Moments;
using internal::stackable_moments;
using torch::optim::OptimizerParamState;

OptimizerParamState* state_of(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  auto& state = optimizer.state();
  auto it = state.find(internal::optimizer_state_key(state, param));
  return it == state.end() ? nullptr : it->second.get();
}

void set_state(torch::optim::Optimizer& optimizer, const at::Tensor& param,
               std::unique_ptr<OptimizerParamState> value) {
  auto& state = optimizer.state();
  state[internal::optimizer_state_key(state, param)] = std::move(value);
}

// One node's step as step_together sees it.
struct Node {
  NodeContext* ctx;
  const std::vector<at::Tensor>* params;
  torch::optim::Optimizer* optimizer;
};

// One parameter of the stack's nodes: theirs, and the stacks they are rows of.
struct StackedParameter {
  std::vector<at::Tensor> params;  // by node
  at::Tensor param, grad;          // the stacks; grad undefined when no node has one
};

// Whether two nodes' moments of one parameter step alike: present in both
// or neither, with one step count.
bool alike(const OptimizerParamState* a, const OptimizerParamState* b, const Moments& moments) {
  return (a == nullptr) == (b == nullptr) && (!a || moments.step(*a) == moments.step(*b));
}

// Whether node `b`'s optimizer state is node `a`'s kind of state: every
// parameter's moments alike.
bool same_state(const Node& a, const Node& b, const Moments& moments) {
  for (size_t p = 0; p < a.params->size(); ++p)
    if (!alike(state_of(*a.optimizer, (*a.params)[p]), state_of(*b.optimizer, (*b.params)[p]), moments)) return false;
  return true;
}

// The distance in elements from node `a`'s parameter p to node `b`'s, for
// every p, where each of b's is a later row of the storage a's is in, the
// two not overlapping; empty otherwise.
std::vector<int64_t> row_distances(const Node& a, const Node& b) {
  std::vector<int64_t> distances;
  for (size_t p = 0; p < a.params->size(); ++p) {
    const at::Tensor& pa = (*a.params)[p];
    const at::Tensor& pb = (*b.params)[p];
    if (!pa.defined() || !pb.defined() || !pb.is_alias_of(pa)) return {};
    const int64_t distance = pb.storage_offset() - pa.storage_offset();
    if (distance < pa.numel()) return {};
    distances.push_back(distance);
  }
  return distances;
}

// The nodes in runs (see above), in order: a node joins the run before it
// when its rows follow at the run's spacing and its state is the run's.
std::vector<std::vector<Node>> runs_of(const std::vector<Node>& nodes, const Moments& moments) {
  std::vector<std::vector<Node>> runs;
  std::vector<int64_t> spacing;  // the current run's, by parameter (empty: one node so far)
  for (size_t k = 0; k < nodes.size(); ++k) {
    bool joins = false;
    if (k > 0) {
      const std::vector<int64_t> distances = row_distances(nodes[k - 1], nodes[k]);
      joins = !distances.empty() && (spacing.empty() || distances == spacing) &&
              same_state(runs.back().front(), nodes[k], moments);
      if (joins) spacing = distances;
    }
    if (!joins) {
      runs.emplace_back();
      spacing.clear();
    }
    runs.back().push_back(nodes[k]);
  }
  return runs;
}

// The stacks of the nodes' parameters and gradients into `stacked`; or
// why they do not stack: a tensor that is not a row of a stack, or the
// nodes' moments of a parameter in different states (some have none yet,
// or their step counts differ).
std::string stack_parameters(const std::vector<Node>& nodes, const Moments& moments,
                             std::vector<StackedParameter>& stacked) {
  stacked.assign(nodes.front().params->size(), StackedParameter());
  const auto which = [](size_t p) { return "the nodes' parameter " + std::to_string(p) + " (in the model's order)"; };
  for (size_t p = 0; p < stacked.size(); ++p) {
    StackedParameter& sp = stacked[p];
    std::vector<at::Tensor> grads;
    for (const Node& node : nodes) {
      sp.params.push_back((*node.params)[p]);
      grads.push_back((*node.params)[p].grad());
    }
    sp.param = stack_of_rows(sp.params);
    if (!sp.param.defined()) return which(p) + " are not the rows of one stack";
    size_t with_grad = 0;
    for (const auto& g : grads) with_grad += g.defined() ? 1 : 0;
    if (with_grad == 0) continue;
    sp.grad = stack_of_rows(grads);
    if (!sp.grad.defined()) return "the gradients of " + which(p) + " are not the rows of one stack";
    const OptimizerParamState* state0 = state_of(*nodes.front().optimizer, sp.params.front());
    for (size_t k = 1; k < nodes.size(); ++k) {
      const OptimizerParamState* state = state_of(*nodes[k].optimizer, sp.params[k]);
      if (!alike(state, state0, moments))
        return "the optimizer states of " + which(p) + " differ (a node's optimizer started again)";
    }
  }
  return "";
}

// Each node's gradient clipped to `max_norm` as clip_grad_norm clips it,
// its norm recorded as "grad_norm" (LocalStep::step).
void clip(const std::vector<Node>& nodes, const std::vector<StackedParameter>& stacked, double max_norm) {
  const StackedParameter* any = nullptr;
  for (const StackedParameter& sp : stacked) any = any ? any : (sp.grad.defined() ? &sp : nullptr);
  if (!any || any->grad.device().is_cpu()) {
    // Each node's own call: the per-node step's bits (shared among the
    // stack's workers, a node per thread, where it has them).
    std::vector<double> norms(nodes.size());
    const at::ThreadLocalState state;  // the caller's grad mode
    const auto clip_node = [&](int64_t k) {
      at::ThreadLocalStateGuard guard(state);
      norms[static_cast<size_t>(k)] = clip_grad_norm(*nodes[static_cast<size_t>(k)].params, max_norm);
    };
    const auto K = static_cast<int64_t>(nodes.size());
    if (NodeWorkers* workers = node_workers()) {
      workers->run(K, clip_node);
    } else {
      for (int64_t k = 0; k < K; ++k) clip_node(k);
    }
    for (size_t k = 0; k < nodes.size(); ++k) nodes[k].ctx->record("grad_norm", norms[k]);
    return;
  }
  const auto K = static_cast<int64_t>(nodes.size());
  std::vector<at::Tensor> norms;  // by stacked gradient: each node's norm of it, [K]
  for (const StackedParameter& sp : stacked)
    if (sp.grad.defined()) norms.push_back(at::norm(sp.grad.reshape({K, -1}), 2, {1}));
  const at::Tensor total = at::norm(at::stack(norms, 1), 2, {1});
  // A node's gradients are scaled where its coefficient is below 1, by 1
  // (which changes no bit) elsewhere.
  const at::Tensor scale = total.add(1e-6).reciprocal().mul(max_norm).clamp_max(1.0);
  for (const StackedParameter& sp : stacked) {
    if (!sp.grad.defined()) continue;
    std::vector<int64_t> shape(static_cast<size_t>(sp.grad.dim()), 1);
    shape[0] = K;
    sp.grad.mul_(scale.view(shape).to(sp.grad.scalar_type()));
  }
  const at::Tensor host = total.to(at::kCPU, at::kDouble).contiguous();  // one read for all the nodes
  for (int64_t k = 0; k < K; ++k) nodes[static_cast<size_t>(k)].ctx->record("grad_norm", host.data_ptr<double>()[k]);
}

// Whether two specs build the same optimizer (compared as they are, not
// serialised: this runs every step).
bool same_optimizer(const OptimizerSpec& a, const OptimizerSpec& b) { return a.name == b.name && a.params == b.params; }

// Whether `row` is row k of `stack`.
bool is_row(const at::Tensor& row, const at::Tensor& stack, int64_t k) {
  return row.defined() && row.is_alias_of(stack) && row.sizes() == stack.sizes().slice(1) &&
         row.storage_offset() == stack.storage_offset() + k * stack.stride(0);
}

// One step of an optimizer built from `spec` over the stacks, with the
// nodes' moments stacked as its state; afterwards each node's state holds
// views of the stacked moments and the new step count.
void step_stacks(const OptimizerSpec& spec, double lr, const Moments& moments, const std::vector<Node>& nodes,
                 const std::vector<StackedParameter>& stacked) {
  std::vector<at::Tensor> aliases;
  std::vector<const StackedParameter*> of_alias;
  for (const StackedParameter& sp : stacked) {
    if (!sp.grad.defined()) continue;
    at::Tensor alias = sp.param.detach().requires_grad_(true);
    alias.mutable_grad() = sp.grad;
    aliases.push_back(alias);
    of_alias.push_back(&sp);
  }
  if (aliases.empty()) return;
  std::vector<at::Tensor> rows0;  // the first node's parameter of each alias
  for (const StackedParameter* sp : of_alias) rows0.push_back(sp->params.front());
  const std::unique_ptr<torch::optim::Optimizer> optimizer =
      moments.stacked_optimizer ? moments.stacked_optimizer(aliases, *nodes.front().optimizer, rows0)
                                : spec.build(aliases);
  set_lr(*optimizer, lr);
  for (size_t a = 0; a < aliases.size(); ++a) {
    const StackedParameter& sp = *of_alias[a];
    OptimizerParamState* first = state_of(*nodes.front().optimizer, sp.params.front());
    if (!first) continue;  // none yet: the optimizer starts every row's
    std::unique_ptr<OptimizerParamState> state = moments.make(*first);
    moments.set_step(*state, moments.step(*first));
    const size_t fields = moments.tensors(*first).size();
    for (size_t f = 0; f < fields; ++f) {
      std::vector<at::Tensor> rows;
      for (size_t k = 0; k < nodes.size(); ++k)
        rows.push_back(*moments.tensors(*state_of(*nodes[k].optimizer, sp.params[k]))[f]);
      if (!rows.front().defined()) continue;
      at::Tensor stack = stack_of_rows(rows);
      // Not rows of one stack yet (a checkpoint's, or a node's own step's): copied into one.
      *moments.tensors(*state)[f] = stack.defined() ? stack : at::stack(rows);
    }
    set_state(*optimizer, aliases[a], std::move(state));
  }
  optimizer->step();
  for (size_t a = 0; a < aliases.size(); ++a) {
    OptimizerParamState* state = state_of(*optimizer, aliases[a]);
    if (!state) continue;  // a kind that keeps none (SGD without momentum)
    const StackedParameter& sp = *of_alias[a];
    for (size_t k = 0; k < nodes.size(); ++k) {
      OptimizerParamState* mine = state_of(*nodes[k].optimizer, sp.params[k]);
      if (!mine) {
        set_state(*nodes[k].optimizer, sp.params[k], moments.make(*state));
        mine = state_of(*nodes[k].optimizer, sp.params[k]);
      }
      moments.set_step(*mine, moments.step(*state));
      const std::vector<at::Tensor*> theirs = moments.tensors(*state), own = moments.tensors(*mine);
      for (size_t f = 0; f < theirs.size(); ++f) {
        const at::Tensor& stack = *theirs[f];
        const auto row = static_cast<int64_t>(k);
        if (!stack.defined()) {
          *own[f] = at::Tensor();
        } else if (!is_row(*own[f], stack, row)) {
          *own[f] = stack.select(0, row);
        }
      }
    }
  }
}

}  // namespace

std::string LocalStep::step_together(const std::vector<LocalStep*>& steps) {
  if (steps.empty() || !steps.front()->ctx_) return "no node to step";
  const LocalStep& first = *steps.front();
  const Moments* moments = stackable_moments(first.options_.optimizer.name);
  if (!moments)
    return "the optimizer \"" + first.options_.optimizer.name + "\" steps no stacks (adamw, adam, sgd and muon do)";
  // One optimizer, clipping and learning rate for all.
  const double lr = first.options_.lr_at(first.ctx_->step, first.ctx_->max_steps);
  std::vector<Node> nodes;
  for (LocalStep* s : steps) {
    if (!s->ctx_ || !s->optimizer_ || s->ctx_->step != first.ctx_->step || s->params_.size() != first.params_.size() ||
        s->options_.max_norm != first.options_.max_norm ||
        !same_optimizer(s->options_.optimizer, first.options_.optimizer) ||
        s->options_.lr_at(s->ctx_->step, s->ctx_->max_steps) != lr)
      return "the nodes' optimizers, clipping or learning rates differ";
    nodes.push_back({s->ctx_, &s->params_, s->optimizer_.get()});
  }
  at::NoGradGuard no_grad;
  // Every run stacks, or nothing is done; nodes that are no run at all say why.
  const std::vector<std::vector<Node>> runs = runs_of(nodes, *moments);
  std::vector<std::vector<StackedParameter>> stacked(runs.size());
  if (nodes.size() > 1 && runs.size() == nodes.size()) {
    if (std::string why = stack_parameters(nodes, *moments, stacked.front()); !why.empty()) return why;
  }
  for (size_t r = 0; r < runs.size(); ++r)
    if (std::string why = stack_parameters(runs[r], *moments, stacked[r]); !why.empty()) return why;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (first.options_.max_norm > 0) clip(runs[r], stacked[r], first.options_.max_norm);
    step_stacks(first.options_.optimizer, lr, *moments, runs[r], stacked[r]);
  }
  for (LocalStep* s : steps) {
    s->lr_ = lr;
    set_lr(*s->optimizer_, lr);  // as a step of its own leaves it
  }
  return "";
}

}  // namespace exogym::sdk
