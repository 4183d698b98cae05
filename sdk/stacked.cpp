// GCC 14 (Debian 13) reports -Warray-bounds and -Wstringop-overflow inside
// LibTorch's autograd::Function::apply (its std::vector<bool>::reserve,
// inlined here): a known false positive of GCC 14 on vector<bool>, in a
// library header; off for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include "exogym/sdk/stacked.h"

#include <ATen/ThreadLocalState.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Optional.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/dropout_mask.h"
#include "exogym/sdk/model.h"

namespace exogym::sdk {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const at::Tensor& named(const std::map<std::string, at::Tensor>& tensors, const std::string& name, const char* what) {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(std::string("the stack has no ") + what + " \"" + name + "\"");
  return it->second;
}

void check_stacked(const at::Tensor& t, int64_t dims, const at::Tensor& like, const char* what) {
  if (t.dim() != dims || t.size(0) != like.size(0))
    throw Error(std::string(what) + ": expected a stack of " + std::to_string(like.size(0)) + " with " +
                std::to_string(dims) + " dimensions, got shape " + shape_of(t));
}

thread_local NodeWorkers* installed_workers = nullptr;

// fn(k) for every node k of K. On the CPU the nodes are shared out among
// the calling thread's workers, a node per thread, each with a node's
// intra-op threads; without workers they take their turns on the calling
// thread, with its intra-op threads. Either way each node's product runs
// as the node computing on its own runs it, with the same bits (shared
// out among the intra-op threads instead, each node's product would run on
// one of them, and round otherwise than on a node's two): one matrix
// product per node, as a batched product is no faster on the CPU. Each
// thread takes the caller's thread-local state (autocast, grad mode); the
// workers' own items install none, so that a layer inside fn(k) computes
// on its thread.
template <class Fn>
void for_each_node(int64_t K, const Fn& fn) {
  if (NodeWorkers* workers = node_workers()) {
    const at::ThreadLocalState state;
    workers->run(K, [&](int64_t k) {
      const NodeWorkersScope alone(nullptr);
      at::ThreadLocalStateGuard guard(state);
      fn(k);
    });
    return;
  }
  for (int64_t k = 0; k < K; ++k) fn(k);
}

// fn(k)'s tensors for every node k, computed as for_each_node does.
template <class Fn>
std::vector<at::Tensor> per_node(int64_t K, const Fn& fn) {
  std::vector<at::Tensor> out(static_cast<size_t>(K));
  for_each_node(K, [&](int64_t k) { out[static_cast<size_t>(k)] = fn(k); });
  return out;
}

// A stack's rows, for per-node calls whose gradients flow back into it:
// unbind's backward stacks them once, where K selects would each write a
// whole stack of zeros around their row.
std::vector<at::Tensor> rows_of(const at::Tensor& stack, int64_t K) {
  return stack.defined() ? stack.unbind(0) : std::vector<at::Tensor>(static_cast<size_t>(K));
}

// The linear layer over stacks, with the backward at::linear's own takes on
// each node (grad_weight = gradᵀ·x, grad_input = grad·W, as mm's backward
// computes them): autograd's bmm backward would form xᵀ·grad and transpose
// it, another order of the same sums, and so other bits than per node. On
// the CPU every product is node k's at::addmm or at::mm, the very calls of
// the unstacked layer; elsewhere one batched product over all nodes.
// Whether autocast is on for the CPU (LibTorch turns it on by taking its
// key off the excluded set): its casts apply to functional calls, not to
// the out= forms, which then run in the inputs' precision.
bool cpu_autocast() { return !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutocastCPU); }

// MKL's products (pip's LibTorch) round by the address an operand starts
// at: a node's own tensors start on LibTorch's 64-byte boundary, a node's
// rows in a stack wherever the rows before them end. So an operand off the
// boundary goes to the product as a copy on it, and a product whose rows
// are off it is written to a fresh tensor first: the bits of the node's own
// tensors. Stacks whose rows fill whole 64 bytes are never copied.
constexpr std::uintptr_t kAllocatorAlignment = 64;

bool on_boundary(const at::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % kAllocatorAlignment == 0;
}

at::Tensor on_boundary_copy(const at::Tensor& t) { return on_boundary(t) ? t : t.clone(); }

// write(dest), through a fresh tensor when dest is off the boundary.
template <class Write>
void write_rows(at::Tensor dest, const Write& write) {
  if (on_boundary(dest)) {
    write(dest);
    return;
  }
  at::Tensor fresh = at::empty(dest.sizes(), dest.options());
  write(fresh);
  dest.copy_(fresh);
}

at::Tensor linear_forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  if (!input.is_cpu()) {
    const at::Tensor transposed = weight.transpose(1, 2);
    return bias.defined() ? at::baddbmm(bias.unsqueeze(1), input, transposed) : at::bmm(input, transposed);
  }
  const int64_t K = input.size(0);
  const auto product = [&](int64_t k) {
    const at::Tensor x = on_boundary_copy(input[k]), w = on_boundary_copy(weight[k]).t();
    return bias.defined() ? at::addmm(bias[k], x, w) : at::mm(x, w);
  };
  if (cpu_autocast()) return at::stack(per_node(K, product));
  // Each node's product straight into its rows: no copy of them.
  at::Tensor out = at::empty({K, input.size(1), weight.size(1)}, input.options());
  for_each_node(K, [&](int64_t k) {
    const at::Tensor x = on_boundary_copy(input[k]), w = on_boundary_copy(weight[k]).t();
    write_rows(out[k], [&](at::Tensor rows) {
      if (bias.defined()) {
        at::addmm_out(rows, bias[k], x, w);
      } else {
        at::mm_out(rows, x, w);
      }
    });
  });
  return out;
}

// The gradients of input, weight and bias (those asked for).
variable_list linear_backward(const at::Tensor& grad, const at::Tensor& saved_input, const at::Tensor& saved_weight,
                              bool for_input, bool for_weight, bool for_bias) {
  // Under autocast the product ran in the lower precision: so does its
  // backward (the engine casts each gradient to its input's dtype).
  const at::Tensor input = saved_input.to(grad.scalar_type()), weight = saved_weight.to(grad.scalar_type());
  at::Tensor grad_input, grad_weight, grad_bias;
  if (!grad.is_cpu()) {
    if (for_input) grad_input = at::bmm(grad, weight);
    if (for_weight) grad_weight = at::bmm(grad.transpose(1, 2), input);
    if (for_bias) grad_bias = grad.sum(1);
    return {grad_input, grad_weight, grad_bias};
  }
  // mm's own backward on each node, written into the node's rows.
  const int64_t K = grad.size(0);
  if (for_input) grad_input = at::empty(input.sizes(), grad.options());
  if (for_weight) grad_weight = at::empty(weight.sizes(), grad.options());
  if (for_bias) grad_bias = at::empty({K, grad.size(2)}, grad.options());
  for_each_node(K, [&](int64_t k) {
    const at::Tensor g = on_boundary_copy(grad[k]);
    if (for_input)
      write_rows(grad_input[k], [&](at::Tensor rows) { at::mm_out(rows, g, on_boundary_copy(weight[k])); });
    if (for_weight)
      write_rows(grad_weight[k], [&](at::Tensor rows) { at::mm_out(rows, g.t(), on_boundary_copy(input[k])); });
    if (for_bias) {
      at::Tensor rows = grad_bias[k];
      at::sum_out(rows, g, 0);
    }
  });
  return {grad_input, grad_weight, grad_bias};
}

// With a bias and without: an input of a custom autograd function must be
// a defined tensor.
struct StackedLinear : torch::autograd::Function<StackedLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias) {
    ctx->save_for_backward({input, weight});
    return linear_forward(input, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return linear_backward(grads[0], saved[0], saved[1], ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                           ctx->needs_input_grad(2));
  }
};

struct StackedProduct : torch::autograd::Function<StackedProduct> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight) {
    ctx->save_for_backward({input, weight});
    return linear_forward(input, weight, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    variable_list both =
        linear_backward(grads[0], saved[0], saved[1], ctx->needs_input_grad(0), ctx->needs_input_grad(1), false);
    both.pop_back();
    return both;
  }
};

// The identity, whose backward hands its gradient on contiguous. A node's
// part of the gradient of a grouped [N, K*C, H, W] tensor is a slice of it
// (cat's backward), with gaps between its images; batch norm's CPU
// backward takes another path for such a gradient than for the contiguous
// one of the unstacked layer, and rounds differently.
struct ContiguousGradient : torch::autograd::Function<ContiguousGradient> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& input) { return input; }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0].contiguous()}; }
};

}  // namespace

NodeWorkersScope::NodeWorkersScope(NodeWorkers* workers) : previous_(installed_workers) { installed_workers = workers; }

NodeWorkersScope::~NodeWorkersScope() { installed_workers = previous_; }

NodeWorkers* node_workers() { return installed_workers; }

const at::Tensor& Stack::parameter(const std::string& name) const { return named(parameters, name, "parameter"); }

const at::Tensor& Stack::buffer(const std::string& name) const { return named(buffers, name, "buffer"); }

at::Tensor stacked_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  if (weight.dim() != 3) throw Error("stacked_linear: expected a weight [K, out, in], got " + shape_of(weight));
  if (input.dim() < 2 || input.size(0) != weight.size(0) || input.size(-1) != weight.size(2))
    throw Error("stacked_linear: input " + shape_of(input) + " does not fit weight " + shape_of(weight));
  if (bias.defined()) check_stacked(bias, 2, weight, "stacked_linear's bias");
  std::vector<int64_t> out_shape = input.sizes().vec();
  out_shape.back() = weight.size(1);
  const at::Tensor rows = input.reshape({input.size(0), -1, input.size(-1)});
  if (bias.defined() && input.dim() > 3 && input.is_cpu()) {
    // torch::nn::Linear (torch::nn::functional::linear) adds the bias after
    // the product where a node's input has more than two dimensions. Once
    // `in` spans several of the BLAS's blocks, that rounds otherwise than
    // addmm, whose sums start from the bias (at::linear fuses the two).
    return StackedProduct::apply(rows, weight).add_(bias.unsqueeze(1)).view(out_shape);
  }
  const at::Tensor out =
      bias.defined() ? StackedLinear::apply(rows, weight, bias) : StackedProduct::apply(rows, weight);
  return out.view(out_shape);
}

at::Tensor stacked_embedding(const at::Tensor& weight, const at::Tensor& ids) {
  if (weight.dim() != 3) throw Error("stacked_embedding: expected a weight [K, V, C], got " + shape_of(weight));
  if (ids.dim() < 1 || ids.size(0) != weight.size(0))
    throw Error("stacked_embedding: ids " + shape_of(ids) + " do not fit weight " + shape_of(weight));
  const int64_t K = weight.size(0), V = weight.size(1);
  std::vector<int64_t> offset_shape(static_cast<size_t>(ids.dim()), 1);
  offset_shape[0] = K;
  // Node k's rows come after the k nodes' before it: one lookup into the
  // K tables laid end to end.
  const at::Tensor offsets = at::arange(K, ids.options().dtype(at::kLong)).mul_(V).view(offset_shape);
  return at::embedding(weight.reshape({K * V, weight.size(2)}), ids.to(at::kLong) + offsets);
}

at::Tensor stacked_layer_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  check_stacked(weight, 2, input, "stacked_layer_norm's weight");
  const int64_t K = input.size(0), C = weight.size(1);
  if (input.is_cpu()) {
    // Each node's at::layer_norm, whose kernel folds the affine part into
    // its normalisation: the unstacked layer's bits.
    const auto xs = rows_of(input, K), ws = rows_of(weight, K), bs = rows_of(bias, K);
    return at::stack(per_node(K, [&](int64_t k) {
      const auto i = static_cast<size_t>(k);
      return at::layer_norm(xs[i], {C}, ws[i], bs[i], eps);
    }));
  }
  std::vector<int64_t> affine_shape(static_cast<size_t>(input.dim()), 1);
  affine_shape.front() = K;
  affine_shape.back() = C;
  const at::Tensor normal = at::layer_norm(input, {C}, {}, {}, eps);
  if (!bias.defined()) return normal * weight.view(affine_shape);
  return at::addcmul(bias.view(affine_shape), normal, weight.view(affine_shape));
}

at::Tensor to_grouped(const at::Tensor& images) {
  if (images.dim() < 3) throw Error("to_grouped: expected [K, N, C, ...], got " + shape_of(images));
  std::vector<int64_t> shape = images.sizes().vec();
  shape.erase(shape.begin());
  shape[1] *= images.size(0);
  return images.transpose(0, 1).reshape(shape);
}

at::Tensor from_grouped(const at::Tensor& grouped, int64_t nodes) {
  if (grouped.dim() < 2 || nodes < 1 || grouped.size(1) % nodes != 0)
    throw Error("from_grouped: " + shape_of(grouped) + " does not hold " + std::to_string(nodes) + " nodes' channels");
  std::vector<int64_t> shape = grouped.sizes().vec();
  shape[1] /= nodes;
  shape.insert(shape.begin() + 1, nodes);
  return grouped.view(shape).transpose(0, 1);
}

at::Tensor stacked_conv2d(const at::Tensor& grouped, const at::Tensor& weight, const at::Tensor& bias, int64_t stride,
                          int64_t padding) {
  if (weight.dim() != 5) throw Error("stacked_conv2d: expected a weight [K, O, C, kh, kw], got " + shape_of(weight));
  const int64_t K = weight.size(0), O = weight.size(1), C = weight.size(2);
  if (grouped.dim() != 4 || grouped.size(1) != K * C)
    throw Error("stacked_conv2d: images " + shape_of(grouped) + " do not fit weight " + shape_of(weight));
  if (bias.defined()) check_stacked(bias, 2, weight, "stacked_conv2d's bias");
  if (grouped.is_cpu()) {
    // Each node's own convolution (the unstacked layer's algorithm, on its
    // images made contiguous as the convolution would make them).
    const auto xs = grouped.split(C, 1);
    const auto ws = rows_of(weight, K), bs = rows_of(bias, K);
    return at::cat(per_node(K,
                            [&](int64_t k) {
                              const auto i = static_cast<size_t>(k);
                              return at::conv2d(xs[i].contiguous(), ws[i], bs[i], {stride, stride}, {padding, padding});
                            }),
                   1);
  }
  const at::Tensor flat_bias = bias.defined() ? bias.reshape({K * O}) : at::Tensor();
  return at::conv2d(grouped, weight.reshape({K * O, C, weight.size(3), weight.size(4)}), flat_bias, {stride, stride},
                    {padding, padding}, {1, 1}, K);
}

at::Tensor stacked_batch_norm(const at::Tensor& grouped, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                              double momentum, double eps) {
  check_stacked(weight, 2, weight, "stacked_batch_norm's weight");
  const int64_t K = weight.size(0), C = weight.size(1), channels = K * C;
  if (grouped.dim() < 2 || grouped.size(1) != channels || bias.numel() != channels ||
      running_mean.numel() != channels || running_var.numel() != channels)
    throw Error("stacked_batch_norm: images " + shape_of(grouped) + " do not fit its weight " + shape_of(weight));
  if (grouped.is_cpu()) {
    // Each node's batch norm of its contiguous images and, in the backward,
    // of its contiguous gradient, its running statistics updated in their
    // rows of the stacks: the unstacked layer's bits.
    const auto xs = grouped.split(C, 1);
    const auto ws = rows_of(weight, K), bs = rows_of(bias, K);
    return at::cat(per_node(K,
                            [&](int64_t k) {
                              const auto i = static_cast<size_t>(k);
                              return ContiguousGradient::apply(at::batch_norm(xs[i].contiguous(), ws[i], bs[i],
                                                                              running_mean[k], running_var[k], training,
                                                                              momentum, eps, /*cudnn_enabled=*/true));
                            }),
                   1);
  }
  // Views of the stacks: the running statistics are updated where they live.
  return at::batch_norm(grouped, weight.reshape({channels}), bias.reshape({channels}), running_mean.view({channels}),
                        running_var.view({channels}), training, momentum, eps, /*cudnn_enabled=*/true);
}

at::Tensor stacked_dropout(const at::Tensor& input, double p, bool training,
                           const std::vector<at::Generator>& generators, bool channelwise) {
  if (!(p >= 0.0 && p < 1.0)) throw Error("dropout: probability must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0.0) return input;
  if (input.dim() < 1 || input.size(0) != static_cast<int64_t>(generators.size()))
    throw Error("stacked_dropout: input " + shape_of(input) + " is not a stack of " +
                std::to_string(generators.size()) + " nodes");
  // Each node's mask as sdk::dropout draws it (shape, dtype, generator),
  // so that the draws are those of the unstacked run.
  std::vector<at::Tensor> masks;
  masks.reserve(generators.size());
  for (size_t k = 0; k < generators.size(); ++k)
    masks.push_back(internal::dropout_mask(input.select(0, static_cast<int64_t>(k)), p, generators[k], channelwise));
  return input * at::stack(masks);
}

at::Tensor stacked_map(int64_t nodes, const std::function<at::Tensor(int64_t k)>& fn, bool on_cpu) {
  if (on_cpu) return at::stack(per_node(nodes, fn));
  std::vector<at::Tensor> rows;
  for (int64_t k = 0; k < nodes; ++k) rows.push_back(fn(k));
  return at::stack(rows);
}

at::Tensor stacked_cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  if (logits.dim() < 2 || target.dim() != logits.dim() - 1 || target.size(0) != logits.size(0))
    throw Error("stacked_cross_entropy: logits " + shape_of(logits) + " do not fit target " + shape_of(target));
  const int64_t K = logits.size(0);
  const at::Tensor each = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                                 target.reshape({-1}).to(at::kLong), {}, at::Reduction::None);
  return each.view({K, -1}).mean(1);
}

}  // namespace exogym::sdk
