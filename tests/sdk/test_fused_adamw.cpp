// The fused AdamW (sdk/internal/fused_adamw.h) against LibTorch's own AdamW: the
// same bits after many steps, and LibTorch's path wherever it cannot fuse.
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/version.h>

#include <cstring>
#include <vector>

#include "exogym/sdk/internal/fused_adamw.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "testing.h"
#include "threaded_workers.h"

using exogym::sdk::internal::FusedAdamW;
using exogym::test::same_bits;

namespace {

std::vector<at::Tensor> leaves(const std::vector<at::Tensor>& values) {
  std::vector<at::Tensor> out;
  for (const auto& v : values) out.push_back(v.clone().requires_grad_(true));
  return out;
}

// Steps both optimizers with the same gradients (every kind of value AdamW
// meets: tiny, large, zeros of both signs, a parameter without a gradient
// at some steps) and checks parameters and state bit for bit.
void step_side_by_side(torch::optim::AdamW& theirs, std::vector<at::Tensor>& their_params, FusedAdamW& ours,
                       std::vector<at::Tensor>& our_params, int steps, bool expect_fused) {
  at::manual_seed(7);
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < their_params.size(); ++i) {
      if (i == 1 && step % 4 == 2) {  // no gradient this step: skipped, as LibTorch skips it
        their_params[i].mutable_grad() = at::Tensor();
        our_params[i].mutable_grad() = at::Tensor();
        continue;
      }
      at::Tensor grad = at::randn(their_params[i].sizes()) * (step % 3 == 0 ? 1e-6 : step % 3 == 1 ? 1.0 : 1e3);
      grad.view(-1)[0] = step % 2 ? 0.0 : -0.0;
      their_params[i].mutable_grad() = grad.clone();
      our_params[i].mutable_grad() = grad;
    }
    if (step == steps / 2) {  // a schedule changes the learning rate between steps
      exogym::sdk::set_lr(theirs, 3e-3);
      exogym::sdk::set_lr(ours, 3e-3);
    }
    theirs.step();
    ours.step();
    CHECK(ours.last_step_fused() == expect_fused);
  }
  exogym::sdk::StateDict their_state, our_state;
  exogym::sdk::save_optimizer_state(theirs, their_params, their_state, "");
  exogym::sdk::save_optimizer_state(ours, our_params, our_state, "");
  REQUIRE(their_state.size() == our_state.size());
  for (const auto& [key, tensor] : their_state) {
    INFO(key);
    REQUIRE(our_state.count(key) == 1);
    CHECK(same_bits(tensor, our_state.at(key)));
  }
  for (size_t i = 0; i < their_params.size(); ++i) {
    INFO("parameter " << i << " of shape " << their_params[i].sizes());
    CHECK(same_bits(their_params[i].detach(), our_params[i].detach()));
  }
}

}  // namespace

TEST_CASE("the fused AdamW is LibTorch's AdamW bit for bit", "[sdk][optim][adamw]") {
#if defined(__x86_64__) && TORCH_VERSION_MAJOR == 1
  // The fused step reproduces LibTorch 1.13's vectorised kernels: there,
  // where they use FMA, it must be in use, which is what makes many-node
  // AdamW runs fast (docs/performance.md). Other LibTorch versions round
  // AdamW differently; their probe decides, and either way the steps below
  // must equal LibTorch's own bit for bit.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) CHECK(FusedAdamW::available());
#endif
  at::manual_seed(3);
  // Every remainder of the vector widths (8 and 16 lanes, LibTorch's 16 and
  // 32) and a weight of the MLP's shape.
  std::vector<at::Tensor> start;
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 33, 1000}) start.push_back(at::randn({n}));
  start.push_back(at::randn({256, 784}) * 0.05);
  start.push_back(at::randn({10, 256}) * 100);
  auto their_params = leaves(start), our_params = leaves(start);
  const auto options = torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
  torch::optim::AdamW theirs(their_params, options);
  FusedAdamW ours(our_params, options);
  step_side_by_side(theirs, their_params, ours, our_params, 24, FusedAdamW::available());
}

TEST_CASE("the fused AdamW shares a large tensor's step among the thread's workers, bit for bit",
          "[sdk][optim][adamw]") {
  // A stack's step (sdk/stacked_step.cpp): chunks of 65,536 elements, the
  // last one short, each on a worker; a small tensor stays on this thread.
  at::manual_seed(4);
  const std::vector<at::Tensor> start = {at::randn({3 * 65536 + 100}), at::randn({1000})};
  auto their_params = leaves(start), our_params = leaves(start);
  const auto options = torch::optim::AdamWOptions(1e-3).weight_decay(0.1);
  torch::optim::AdamW theirs(their_params, options);
  FusedAdamW ours(our_params, options);
  exogym::test::ThreadedWorkers workers;
  {
    const exogym::sdk::NodeWorkersScope scope(&workers);
    step_side_by_side(theirs, their_params, ours, our_params, 8, FusedAdamW::available());
  }
  // Where the probe allows the fused step: 4 chunks a step.
  CHECK(workers.items.load() == (FusedAdamW::available() ? 8 * 4 : 0));
}

TEST_CASE("the fused AdamW leaves to LibTorch what it cannot fuse", "[sdk][optim][adamw]") {
  at::manual_seed(4);
  SECTION("amsgrad") {
    auto their_params = leaves({at::randn({40})}), our_params = leaves({their_params[0].detach()});
    const auto options = torch::optim::AdamWOptions(1e-2).amsgrad(true);
    torch::optim::AdamW theirs(their_params, options);
    FusedAdamW ours(our_params, options);
    step_side_by_side(theirs, their_params, ours, our_params, 6, false);
  }
  SECTION("a parameter that is not contiguous") {
    const at::Tensor transposed = at::randn({6, 5}).t();
    REQUIRE_FALSE(transposed.is_contiguous());
    std::vector<at::Tensor> their_params{transposed.clone(at::MemoryFormat::Preserve).requires_grad_(true)};
    std::vector<at::Tensor> our_params{transposed.clone(at::MemoryFormat::Preserve).requires_grad_(true)};
    REQUIRE_FALSE(our_params[0].is_contiguous());
    torch::optim::AdamW theirs(their_params, torch::optim::AdamWOptions(1e-2));
    FusedAdamW ours(our_params, torch::optim::AdamWOptions(1e-2));
    step_side_by_side(theirs, their_params, ours, our_params, 6, false);
  }
  SECTION("double precision") {
    auto their_params = leaves({at::randn({40}, at::kDouble)}), our_params = leaves({their_params[0].detach()});
    torch::optim::AdamW theirs(their_params, torch::optim::AdamWOptions(1e-2));
    FusedAdamW ours(our_params, torch::optim::AdamWOptions(1e-2));
    step_side_by_side(theirs, their_params, ours, our_params, 6, false);
  }
  SECTION("a closure, which makes the gradients inside step()") {
    auto params = leaves({at::randn({12})});
    FusedAdamW ours(params, torch::optim::AdamWOptions(1e-2));
    const at::Tensor loss = ours.step([&] {
      ours.zero_grad();
      at::Tensor l = (params[0] * params[0]).sum();
      l.backward();
      return l;
    });
    CHECK_FALSE(ours.last_step_fused());
    CHECK(loss.defined());
  }
}

TEST_CASE("optimizer specs build the fused AdamW, which checkpoints as LibTorch's", "[sdk][optim][adamw]") {
  at::manual_seed(5);
  std::vector<at::Tensor> params{at::randn({300}).requires_grad_(true)};
  auto built = exogym::sdk::OptimizerSpec::from_json("adamw", "o").build(params);
  REQUIRE(dynamic_cast<FusedAdamW*>(built.get()) != nullptr);
  params[0].mutable_grad() = at::randn({300});
  built->step();
  // Restored into a fresh optimizer, the state continues bit for bit.
  exogym::sdk::StateDict saved;
  exogym::sdk::save_optimizer_state(*built, params, saved, "opt.");
  CHECK(saved.count("opt.0.exp_avg") == 1);
  CHECK(saved.at("opt.0.step").item<int64_t>() == 1);
  std::vector<at::Tensor> copy{params[0].detach().clone().requires_grad_(true)};
  auto restored = exogym::sdk::OptimizerSpec::from_json("adamw", "o").build(copy);
  exogym::sdk::load_optimizer_state(*restored, copy, saved, "opt.");
  const at::Tensor grad = at::randn({300});
  params[0].mutable_grad() = grad.clone();
  copy[0].mutable_grad() = grad.clone();
  built->step();
  restored->step();
  CHECK(same_bits(params[0].detach(), copy[0].detach()));
}

TEST_CASE("the multi-tensor AdamW of GPUs is LibTorch's AdamW up to rounding", "[sdk][optim][adamw]") {
  // On a GPU step() launches LibTorch's multi-tensor kernel; LibTorch 2.4
  // and later have it on the CPU too, where it is checked here.
  at::manual_seed(5);
  std::vector<at::Tensor> start{at::randn({7}), at::randn({33, 5}) * 0.05, at::randn({1000}) * 100};
  auto their_params = leaves(start), our_params = leaves(start);
  const auto options = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
  torch::optim::AdamW theirs(their_params, options);
  FusedAdamW ours(our_params, options);
  for (int step = 0; step < 12; ++step) {
    for (size_t i = 0; i < start.size(); ++i) {
      if (i == 0 && step % 4 == 2) {  // no gradient: no step, and its own step count
        their_params[i].mutable_grad() = at::Tensor();
        our_params[i].mutable_grad() = at::Tensor();
        continue;
      }
      at::Tensor grad = at::randn(start[i].sizes()) * (step % 2 ? 1e-3 : 1.0);
      their_params[i].mutable_grad() = grad.clone();
      our_params[i].mutable_grad() = grad;
    }
    theirs.step();
    if (!ours.multi_tensor_step()) {
      // Only LibTorch 1.x lacks the kernel; there nothing may have changed.
      CHECK(TORCH_VERSION_MAJOR < 2);
      for (size_t i = 0; i < start.size(); ++i) CHECK(same_bits(our_params[i].detach(), start[i]));
      return;
    }
  }
  exogym::sdk::StateDict their_state, our_state;
  exogym::sdk::save_optimizer_state(theirs, their_params, their_state, "");
  exogym::sdk::save_optimizer_state(ours, our_params, our_state, "");
  REQUIRE(their_state.size() == our_state.size());
  for (const auto& [key, tensor] : their_state) {
    INFO(key);
    REQUIRE(our_state.count(key) == 1);
    if (!tensor.is_floating_point()) {
      CHECK(same_bits(tensor, our_state.at(key)));  // the step counts
    } else {
      CHECK(at::allclose(tensor, our_state.at(key), 1e-5, 1e-7));
    }
  }
  for (size_t i = 0; i < start.size(); ++i) {
    INFO("parameter " << i);
    const at::Tensor ours_i = our_params[i].detach(), theirs_i = their_params[i].detach();
    CHECK(at::allclose(ours_i, theirs_i, 1e-5, 1e-6));
    CHECK_FALSE(at::equal(ours_i, start[i]));  // it did train
  }
}
