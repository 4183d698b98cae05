#pragma once
// Stacked execution (docs/performance.md#stacked-execution). The nodes of a
// process whose models have the same parameters may keep each parameter of
// all K of them in one tensor of shape [K, ...], a stack, node k's
// parameter being a view of row k: strategies, optimizers, byte counts and
// checkpoints still see one node's tensors. A model plugin that can compute
// the K nodes at once implements Model::stacked_loss (model.h); the runtime
// then runs one forward and one backward per micro-batch for all K nodes
// instead of K of each (on a GPU, one kernel launch where there were K).
//
// A stacked forward computes what K calls of Model::loss compute, each
// node's rows with that node's tensors: the node is one more leading
// dimension. The layers below are the usual ones over stacks. On the CPU
// each gives node k the unstacked layer's result bit for bit: its matrix
// products, convolutions and norms are node k's own calls with a node's
// intra-op threads, shared out among the calling thread's NodeWorkers a
// node per worker, or in turn where it has none (one big batched call is
// no faster on a CPU), and the elementwise layers are exact anyway. On a
// GPU one kernel computes all K nodes, whose rounding may differ from K
// unstacked kernels' (docs/performance.md#where-stacked-rounding-differs).
// stacked_cross_entropy's mean over a node's examples is reduced in another
// order than at::cross_entropy_loss's, so the loss it reports may differ in
// its last bits; its gradients do not.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace exogym::sdk {

// What a stacked forward computes with, under the names the model's
// network() gives its parameters and buffers: the K nodes' parameters
// stacked ([K, ...], gradients flow into them) and buffers ([K, ...]; a
// forward updates them in place, as BatchNorm's running statistics).
struct Stack {
  std::map<std::string, at::Tensor> parameters, buffers;
  // Node k's Model::generator(): node k's randomness comes from it.
  std::vector<at::Generator> generators;

  int64_t size() const { return static_cast<int64_t>(generators.size()); }
  // The stack of that name; sdk::Error naming it when there is none.
  const at::Tensor& parameter(const std::string& name) const;
  const at::Tensor& buffer(const std::string& name) const;
};

// input [K, ..., in], weight [K, out, in], bias [K, out] or undefined:
// [K, ..., out], row k being what torch::nn::Linear computes of input[k]
// with weight[k] and bias[k] (torch::nn::functional::linear: for an input
// of more than two dimensions the product, then the bias added; at::linear
// fuses the two, which rounds otherwise).
at::Tensor stacked_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);

// ids [K, ...] of integers, weight [K, V, C]: [K, ..., C], row k looking up
// ids[k] in weight[k].
at::Tensor stacked_embedding(const at::Tensor& weight, const at::Tensor& ids);

// Layer norm over the last dimension C of input [K, ..., C], with node k's
// weight[k] and bias[k] ([K, C]; bias may be undefined).
at::Tensor stacked_layer_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double eps);

// Images of K nodes in the grouped layout [N, K*C, H, W], node k's channels
// at k*C ... (k+1)*C-1, in which the K nodes' convolutions are one grouped
// convolution and their batch norms one batch norm. to_grouped takes
// [K, N, C, H, W] there, from_grouped back (a view).
at::Tensor to_grouped(const at::Tensor& images);
at::Tensor from_grouped(const at::Tensor& grouped, int64_t nodes);

// grouped [N, K*C, H, W], weight [K, O, C, kh, kw], bias [K, O] or
// undefined: [N, K*O, H', W'], node k's part being at::conv2d of its images.
at::Tensor stacked_conv2d(const at::Tensor& grouped, const at::Tensor& weight, const at::Tensor& bias,
                          int64_t stride = 1, int64_t padding = 0);

// Batch norm of grouped [N, K*C, H, W] with node k's weight, bias and
// running statistics ([K, C] each; the statistics are updated in place in
// training, as at::batch_norm updates node k's).
at::Tensor stacked_batch_norm(const at::Tensor& grouped, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                              double momentum, double eps);

// sdk::dropout (model.h) of each node's rows of input [K, ...] with its own
// generator: the masks K unstacked calls would draw, in the same order.
// `channelwise`: input is [K, N, C, ...] and whole channels drop.
at::Tensor stacked_dropout(const at::Tensor& input, double p, bool training,
                           const std::vector<at::Generator>& generators, bool channelwise = false);

// fn(k) for every node k of `nodes`, stacked ([K, ...]): on the CPU the
// nodes are shared out among LibTorch's intra-op threads, one node's fn on
// one thread, as the layers above compute on the CPU; elsewhere one node
// after the other. For a layer with no stacked form, or whose stacked form
// is slower on the CPU than one node per thread (attention over many short
// sequences: a batched product splits each small product among the threads).
// The thread-local state (autocast, grad mode) is the caller's.
at::Tensor stacked_map(int64_t nodes, const std::function<at::Tensor(int64_t k)>& fn, bool on_cpu);

// logits [K, ..., C] against target [K, ...] of class indices: node k's
// mean cross-entropy, [K] (gradients as at::cross_entropy_loss's on each).
at::Tensor stacked_cross_entropy(const at::Tensor& logits, const at::Tensor& target);

// The stack [K, ...] whose rows are `rows`, in order, as stacked execution
// lays out parameters, gradients and optimizer moments: every row a
// contiguous tensor of one storage, at equal distances. Undefined when they
// are not (a gradient a strategy replaced, the gathered rows of a stack
// with nodes down).
at::Tensor stack_of_rows(const std::vector<at::Tensor>& rows);

// The threads that share a stack's work on the CPU, a node (or a chunk of
// a stack) per thread: the layers above and the stacked local steps hand
// their per-node work to the ones installed on the calling thread. The
// runtime lends the thread that computes a stack the compute slots of the
// nodes waiting for it (runtime/train/stack_group.cpp); without any, the
// layers share nodes among LibTorch's intra-op threads and the steps take
// them one after the other.
class NodeWorkers {
 public:
  virtual ~NodeWorkers() = default;
  // item(i) for every i in [0, count), returning when all are done and
  // rethrowing the first exception. One caller at a time.
  virtual void run(int64_t count, const std::function<void(int64_t)>& item) = 0;
};

// Installs `workers` for the calling thread while it lives (null: none).
class NodeWorkersScope {
 public:
  explicit NodeWorkersScope(NodeWorkers* workers);
  ~NodeWorkersScope();
  NodeWorkersScope(const NodeWorkersScope&) = delete;
  NodeWorkersScope& operator=(const NodeWorkersScope&) = delete;

 private:
  NodeWorkers* previous_;
};

// The calling thread's workers, or null.
NodeWorkers* node_workers();

class LocalStep;  // local_step.h

// The local steps of a stack's nodes taken at once: the runtime gives each
// stacked node one (NodeContext::stack), to which LocalStep::step() hands
// itself. The stack's live nodes meet there, and one optimizer step over
// the stacks (LocalStep::step_together) takes all of theirs.
class StackedSteps {
 public:
  virtual ~StackedSteps() = default;
  // `step`'s step with the other live nodes of the stack. False when the
  // node must take it on its own (the nodes' optimizers, options or
  // tensors do not stack, or it stepped already in this step).
  virtual bool take(LocalStep& step) = 0;
  // From a strategy's zero_grad(), when the first thing its step() does is
  // `step`'s step() and nothing reads or changes the node's gradients or
  // parameters between its backward and that step (a composed strategy,
  // compose.h): the stack may then take the step right after the
  // backward, a part of the stack at a time, so that only one part's
  // gradients are alive at once; take() then returns true at once.
  virtual void take_after_backward(LocalStep& step) = 0;
};

}  // namespace exogym::sdk
