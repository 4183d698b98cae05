// The layers over stacks (sdk/stacked.h) against K calls of the unstacked
// layers, each with node k's tensors: on the CPU bit for bit (but the
// cross-entropy's loss, reduced over the stack: within rounding), forward
// and backward; and BatchNorm's running statistics updated in the stack.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/linear.h>

#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/stacked.h"
#include "testing.h"
#include "threaded_workers.h"

namespace sdk = exogym::sdk;

namespace {

constexpr int64_t K = 3;

at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(true); }

// The same values as `stack`'s row k, as a leaf of its own (in memory of
// its own, as a node's tensor is).
at::Tensor row(const at::Tensor& stack, int64_t k) { return leaf(stack.select(0, k)); }

bool same_values(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); }

}  // namespace

TEST_CASE("stacked_linear gives each node torch::nn::Linear's output and gradients bit for bit", "[stacked]") {
  at::manual_seed(1);
  // A node's input of two dimensions (the MLP's) and of three (nanoGPT's),
  // for which torch::nn::Linear adds the bias after the product: with 512
  // inputs the BLAS sums in several blocks, and addmm, starting from the
  // bias, would round otherwise.
  for (const std::vector<int64_t>& node_shape : {std::vector<int64_t>{10, 512}, std::vector<int64_t>{2, 5, 512}}) {
    INFO("a node's input of " << node_shape.size() << " dimensions");
    std::vector<int64_t> shape = node_shape;
    shape.insert(shape.begin(), K);
    const at::Tensor x = leaf(at::randn(shape)), w = leaf(at::randn({K, 4, 512})), b = leaf(at::randn({K, 4}));
    shape.back() = 4;
    const at::Tensor grad = at::randn(shape);
    const at::Tensor out = sdk::stacked_linear(x, w, b);
    REQUIRE(out.sizes() == at::IntArrayRef(shape));
    out.backward(grad);
    for (int64_t k = 0; k < K; ++k) {
      const at::Tensor xk = row(x, k), wk = row(w, k), bk = row(b, k);
      const at::Tensor ok = torch::nn::functional::linear(xk, wk, bk);
      ok.backward(grad.select(0, k));
      CHECK(same_values(out.select(0, k), ok));
      CHECK(same_values(x.grad().select(0, k), xk.grad()));
      CHECK(same_values(w.grad().select(0, k), wk.grad()));
      CHECK(same_values(b.grad().select(0, k), bk.grad()));
    }
  }
  const at::Tensor x = leaf(at::randn({K, 2, 5, 7})), w = leaf(at::randn({K, 4, 7})), b = leaf(at::randn({K, 4}));
  // Without a bias, and with a weight that wants no gradient.
  const at::Tensor fixed = w.detach();
  const at::Tensor plain = sdk::stacked_linear(x, fixed, at::Tensor());
  // The node's own tensors start on the allocator's boundary, as clones do
  // (MKL's bits depend on it: sdk/stacked.cpp).
  CHECK(same_values(plain.select(0, 1).reshape({10, 4}),
                    at::linear(x.detach()[1].reshape({10, 7}).clone(), fixed[1].clone())));
  CHECK_THROWS_WITH(sdk::stacked_linear(x, at::randn({K, 4, 6}), b), Catch::Contains("does not fit weight [3, 4, 6]"));
}

TEST_CASE("stacked_embedding looks each node's ids up in its own table, gradients bit for bit", "[stacked]") {
  at::manual_seed(2);
  const at::Tensor table = leaf(at::randn({K, 6, 4}));
  const at::Tensor ids = at::randint(0, 6, {K, 2, 5}, at::kLong);
  const at::Tensor grad = at::randn({K, 2, 5, 4});
  sdk::stacked_embedding(table, ids).backward(grad);
  for (int64_t k = 0; k < K; ++k) {
    const at::Tensor tk = row(table, k);
    at::embedding(tk, ids[k]).backward(grad[k]);
    CHECK(same_values(at::embedding(tk, ids[k]), sdk::stacked_embedding(table, ids).select(0, k)));
    CHECK(same_values(table.grad().select(0, k), tk.grad()));
  }
}

TEST_CASE("stacked_dropout draws each node's masks from its own generator, as sdk::dropout does", "[stacked]") {
  std::vector<at::Generator> stacked, single;
  for (int64_t k = 0; k < K; ++k) {
    stacked.push_back(at::detail::createCPUGenerator(100 + k));
    single.push_back(at::detail::createCPUGenerator(100 + k));
  }
  const at::Tensor x = at::randn({K, 4, 3, 2, 2});
  for (bool channelwise : {false, true}) {
    const at::Tensor out = sdk::stacked_dropout(x, 0.3, true, stacked, channelwise);
    for (int64_t k = 0; k < K; ++k) CHECK(same_values(out[k], sdk::dropout(x[k], 0.3, true, single[k], channelwise)));
  }
  CHECK(same_values(sdk::stacked_dropout(x, 0.3, false, stacked), x));
  CHECK_THROWS_WITH(sdk::stacked_dropout(x, 0.3, true, {stacked[0]}), Catch::Contains("is not a stack of 1 nodes"));
}

TEST_CASE("stacked_cross_entropy is each node's mean loss, its gradients bit for bit", "[stacked]") {
  at::manual_seed(3);
  const at::Tensor logits = leaf(at::randn({K, 2, 6, 5}));
  const at::Tensor target = at::randint(0, 5, {K, 2, 6}, at::kLong);
  const at::Tensor losses = sdk::stacked_cross_entropy(logits, target);
  REQUIRE(losses.sizes() == at::IntArrayRef({K}));
  losses.sum().backward();
  for (int64_t k = 0; k < K; ++k) {
    const at::Tensor lk = row(logits, k);
    const at::Tensor loss = at::cross_entropy_loss(lk.reshape({12, 5}), target[k].reshape({12}));
    loss.backward();
    CHECK(losses[k].item<double>() == Approx(loss.item<double>()).epsilon(1e-6));
    CHECK(same_values(logits.grad().select(0, k), lk.grad()));
  }
}

TEST_CASE("stacked layer norm, convolution and batch norm give each node's outputs and gradients bit for bit",
          "[stacked]") {
  at::manual_seed(4);
  SECTION("layer norm") {
    const at::Tensor x = at::randn({K, 2, 3, 8}), w = at::randn({K, 8}), b = at::randn({K, 8});
    const at::Tensor out = sdk::stacked_layer_norm(x, w, b, 1e-5);
    for (int64_t k = 0; k < K; ++k) CHECK(same_values(out[k], at::layer_norm(x[k], {8}, w[k], b[k], 1e-5)));
  }
  SECTION("convolution, batch norm, ReLU and max pooling in the grouped layout") {
    const at::Tensor images = at::randn({K, 8, 2, 6, 6});
    const at::Tensor w = at::randn({K, 3, 2, 3, 3}), bias = at::randn({K, 3});
    const at::Tensor gamma = at::rand({K, 3}), beta = at::randn({K, 3}), grad = at::randn({K, 8, 3, 3, 3});
    const at::Tensor grouped = sdk::to_grouped(images);
    REQUIRE(grouped.sizes() == at::IntArrayRef({8, K * 2, 6, 6}));
    CHECK(same_values(sdk::from_grouped(grouped, K), images));
    const at::Tensor xs = leaf(images), ws = leaf(w), bs = leaf(bias), gs = leaf(gamma), es = leaf(beta);
    at::Tensor mean = at::zeros({K, 3}), var = at::ones({K, 3});
    const at::Tensor conv = sdk::stacked_conv2d(sdk::to_grouped(xs), ws, bs, 1, 1);
    const at::Tensor out = sdk::from_grouped(
        at::max_pool2d(at::relu(sdk::stacked_batch_norm(conv, gs, es, mean, var, true, 0.1, 1e-5)), {2, 2}), K);
    out.backward(grad);
    for (int64_t k = 0; k < K; ++k) {
      INFO("node " << k);
      const at::Tensor xk = row(images, k), wk = row(w, k), bk = row(bias, k), gk = row(gamma, k), ek = row(beta, k);
      at::Tensor mk = at::zeros({3}), vk = at::ones({3});
      const at::Tensor ck = at::conv2d(xk, wk, bk, {1, 1}, {1, 1});
      const at::Tensor ok = at::max_pool2d(at::relu(at::batch_norm(ck, gk, ek, mk, vk, true, 0.1, 1e-5, true)), {2, 2});
      ok.backward(grad[k]);
      CHECK(same_values(sdk::from_grouped(conv, K)[k], ck));
      CHECK(same_values(out[k], ok));
      // Batch norm's backward gets the node's gradient contiguous, as
      // unstacked: a slice of the grouped gradient would round otherwise.
      CHECK(same_values(xs.grad()[k], xk.grad()));
      CHECK(same_values(ws.grad()[k], wk.grad()));
      CHECK(same_values(bs.grad()[k], bk.grad()));
      CHECK(same_values(gs.grad()[k], gk.grad()));
      CHECK(same_values(es.grad()[k], ek.grad()));
      // The running statistics move in the stack's row k.
      CHECK(same_values(mean[k], mk));
      CHECK(same_values(var[k], vk));
    }
  }
}

TEST_CASE("the stacked layers share their nodes among the calling thread's workers, with the same bits", "[stacked]") {
  at::manual_seed(9);
  const at::Tensor x = at::randn({K, 6, 7}), w = at::randn({K, 4, 7}), b = at::randn({K, 4}), scale = at::randn({K, 4}),
                   shift = at::randn({K, 4}), grad = at::randn({K, 6, 4});
  // A linear layer, a layer norm and a map, forward and backward: the
  // outputs and every gradient.
  const auto run = [&](sdk::NodeWorkers* workers) {
    const sdk::NodeWorkersScope scope(workers);
    const at::Tensor xl = leaf(x), wl = leaf(w), bl = leaf(b), sl = leaf(scale), tl = leaf(shift);
    const at::Tensor normal = sdk::stacked_layer_norm(sdk::stacked_linear(xl, wl, bl), sl, tl, 1e-5);
    const auto rows = normal.unbind(0);
    const at::Tensor out = sdk::stacked_map(
        K, [&](int64_t k) { return rows[static_cast<size_t>(k)].tanh(); }, /*on_cpu=*/true);
    out.backward(grad);
    return std::vector<at::Tensor>{out.detach(), xl.grad(), wl.grad(), bl.grad(), sl.grad(), tl.grad()};
  };
  const auto alone = run(nullptr);
  exogym::test::ThreadedWorkers workers;
  const auto shared = run(&workers);
  CHECK(sdk::node_workers() == nullptr);  // the scope ended
  // The linear layer's forward and backward (the backward runs in autograd's
  // engine on this thread), the layer norm and the map: a job of K nodes each.
  CHECK(workers.jobs.load() == 4);
  CHECK(workers.items.load() == 4 * K);
  for (size_t i = 0; i < alone.size(); ++i) {
    INFO("tensor " << i);
    CHECK(same_values(alone[i], shared[i]));
  }
}

TEST_CASE("a Stack names the tensor it does not hold", "[stacked]") {
  sdk::Stack stack;
  stack.parameters["w"] = at::zeros({2, 3});
  CHECK(stack.parameter("w").size(0) == 2);
  CHECK_THROWS_WITH(stack.parameter("v"), "the stack has no parameter \"v\"");
  CHECK_THROWS_WITH(stack.buffer("w"), "the stack has no buffer \"w\"");
}
