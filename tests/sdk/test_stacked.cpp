// The layers over stacks (sdk/stacked.h) against K calls of the unstacked
// layers, each with node k's tensors: bit for bit where the header says so
// (linear, embedding, dropout, cross-entropy's gradients), within rounding
// for the others; and BatchNorm's running statistics updated in the stack.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

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

TEST_CASE("stacked_linear gives each node at::linear's output and gradients bit for bit", "[stacked]") {
  at::manual_seed(1);
  const at::Tensor x = leaf(at::randn({K, 2, 5, 7})), w = leaf(at::randn({K, 4, 7})), b = leaf(at::randn({K, 4}));
  const at::Tensor grad = at::randn({K, 2, 5, 4});
  const at::Tensor out = sdk::stacked_linear(x, w, b);
  REQUIRE(out.sizes() == at::IntArrayRef({K, 2, 5, 4}));
  out.backward(grad);
  for (int64_t k = 0; k < K; ++k) {
    const at::Tensor xk = row(x, k), wk = row(w, k), bk = row(b, k);
    const at::Tensor ok = at::linear(xk.reshape({10, 7}), wk, bk);
    ok.backward(grad.select(0, k).reshape({10, 4}));
    CHECK(same_values(out.select(0, k).reshape({10, 4}), ok));
    CHECK(same_values(x.grad().select(0, k), xk.grad()));
    CHECK(same_values(w.grad().select(0, k), wk.grad()));
    CHECK(same_values(b.grad().select(0, k), bk.grad()));
  }
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

TEST_CASE("stacked layer norm, convolution and batch norm match each node's within rounding", "[stacked]") {
  at::manual_seed(4);
  SECTION("layer norm") {
    const at::Tensor x = at::randn({K, 2, 3, 8}), w = at::randn({K, 8}), b = at::randn({K, 8});
    const at::Tensor out = sdk::stacked_layer_norm(x, w, b, 1e-5);
    for (int64_t k = 0; k < K; ++k)
      CHECK(at::allclose(out[k], at::layer_norm(x[k], {8}, w[k], b[k], 1e-5), 1e-5, 1e-6));
  }
  SECTION("convolution and batch norm in the grouped layout") {
    const at::Tensor images = at::randn({K, 4, 2, 6, 6});
    const at::Tensor w = at::randn({K, 3, 2, 3, 3}), bias = at::randn({K, 3});
    const at::Tensor gamma = at::rand({K, 3}), beta = at::randn({K, 3});
    at::Tensor mean = at::zeros({K, 3}), var = at::ones({K, 3});
    const at::Tensor grouped = sdk::to_grouped(images);
    REQUIRE(grouped.sizes() == at::IntArrayRef({4, K * 2, 6, 6}));
    CHECK(same_values(sdk::from_grouped(grouped, K), images));
    const at::Tensor conv = sdk::stacked_conv2d(grouped, w, bias, 1, 1);
    const at::Tensor norm =
        sdk::from_grouped(sdk::stacked_batch_norm(conv, gamma, beta, mean, var, true, 0.1, 1e-5), K);
    for (int64_t k = 0; k < K; ++k) {
      const at::Tensor ck = at::conv2d(images[k], w[k], bias[k], {1, 1}, {1, 1});
      CHECK(at::allclose(sdk::from_grouped(conv, K)[k], ck, 1e-5, 1e-5));
      at::Tensor mk = at::zeros({3}), vk = at::ones({3});
      const at::Tensor nk = at::batch_norm(ck, gamma[k], beta[k], mk, vk, true, 0.1, 1e-5, true);
      CHECK(at::allclose(norm[k], nk, 1e-4, 1e-5));
      // The running statistics move in the stack's row k.
      CHECK(at::allclose(mean[k], mk, 1e-5, 1e-6));
      CHECK(at::allclose(var[k], vk, 1e-5, 1e-6));
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
