// Muon (sdk/internal/muon.h): its step against a reference written here in
// double precision, the AdamW fallback against LibTorch's AdamW, the
// learning-rate schedule, its state through checkpoints, and its errors.
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/replicas.h"
#include "exogym/sdk/internal/muon.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::OptimizerSpec;
using exogym::sdk::StateDict;
using exogym::sdk::internal::Muon;
using exogym::test::config_error;
using exogym::test::same_bits;
using nlohmann::json;

namespace {

// A row-major matrix of doubles: the reference computes without LibTorch.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double& at(int64_t r, int64_t c) { return v[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

Matrix zeros(int64_t rows, int64_t cols) { return {rows, cols, std::vector<double>(rows * cols, 0.0)}; }

Matrix transpose(const Matrix& m) {
  Matrix t = zeros(m.cols, m.rows);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) t.at(c, r) = m.at(r, c);
  return t;
}

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix out = zeros(a.rows, b.cols);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < b.cols; ++c)
      for (int64_t k = 0; k < a.cols; ++k) out.at(r, c) += a.at(r, k) * b.at(k, c);
  return out;
}

// x * a + y * b, element by element.
Matrix combine(const Matrix& x, double a, const Matrix& y, double b) {
  Matrix out = x;
  for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = a * x.v[i] + b * y.v[i];
  return out;
}

// The reference's quintic Newton-Schulz iteration, in double.
Matrix newton_schulz(const Matrix& update, int steps) {
  const bool tall = update.rows > update.cols;
  Matrix x = tall ? transpose(update) : update;
  double norm = 0;
  for (double e : x.v) norm += e * e;
  x = combine(x, 1 / (std::sqrt(norm) + 1e-7), x, 0);
  for (int i = 0; i < steps; ++i) {
    const Matrix a = product(x, transpose(x));
    const Matrix b = combine(a, -4.7750, product(a, a), 2.0315);
    x = combine(x, 3.4445, product(b, x), 1);
  }
  return tall ? transpose(x) : x;
}

Matrix to_matrix(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
  const int64_t rows = d.size(0), cols = d.numel() / rows;
  return {rows, cols, std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel())};
}

at::Tensor to_tensor(const Matrix& m) { return at::tensor(m.v, at::kDouble).reshape({m.rows, m.cols}).to(at::kFloat); }

double max_abs_diff(const at::Tensor& ours, const Matrix& reference) {
  const Matrix m = to_matrix(ours);
  double worst = 0;
  for (size_t i = 0; i < m.v.size(); ++i) worst = std::max(worst, std::abs(m.v[i] - reference.v[i]));
  return worst;
}

// Deterministic values of both signs, from doubles converted to float,
// without touching a generator.
at::Tensor wave(const std::vector<int64_t>& shape, double phase) {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return at::sin(at::arange(n, at::kDouble) * 1.7 + phase).mul(1 + phase).reshape(shape).to(at::kFloat);
}

}  // namespace

TEST_CASE("muon's spec writes out its defaults and checks each hyper-parameter", "[sdk][optim][muon]") {
  CHECK(OptimizerSpec::from_json("Muon", "o").to_json() == json({{"name", "muon"},
                                                                 {"lr", 0.02},
                                                                 {"momentum", 0.95},
                                                                 {"nesterov", true},
                                                                 {"ns_steps", 5},
                                                                 {"weight_decay", 0.0},
                                                                 {"adamw_lr", 3e-4},
                                                                 {"adamw_betas", {0.9, 0.95}},
                                                                 {"adamw_eps", 1e-8},
                                                                 {"adamw_weight_decay", 0.0},
                                                                 {"adamw_params", nullptr}}));
  auto what = [](const json& value) {
    json spec = {{"name", "muon"}};
    spec.update(value);
    return std::string(config_error([&] { OptimizerSpec::from_json(spec, "strategy.options.optimizer"); }).what());
  };
  CHECK(what({{"ns_steps", 0}}) == "strategy.options.optimizer.ns_steps: expected a positive integer, got 0");
  CHECK(what({{"ns_steps", 2.5}}) == "strategy.options.optimizer.ns_steps: expected a positive integer, got 2.5");
  CHECK(what({{"ns_steps", "5"}}) == "strategy.options.optimizer.ns_steps: expected a positive integer, got \"5\"");
  // A step is not interrupted: 1e9 iterations would be a step that never ends, deaf to SIGTERM.
  CHECK(what({{"ns_steps", 1000000000}}) ==
        "strategy.options.optimizer.ns_steps: expected a positive integer no larger than 100, got 1000000000");
  CHECK(what({{"ns_steps", 101}}) ==
        "strategy.options.optimizer.ns_steps: expected a positive integer no larger than 100, got 101");
  CHECK(OptimizerSpec::from_json({{"name", "muon"}, {"ns_steps", 100}}, "o").params.at("ns_steps") == 100);
  CHECK(what({{"momentum", -0.1}}) == "strategy.options.optimizer.momentum: expected a non-negative number, got -0.1");
  CHECK(what({{"adamw_lr", 0}}) == "strategy.options.optimizer.adamw_lr: expected a positive number, got 0");
  CHECK(what({{"adamw_betas", {0.9}}}) ==
        "strategy.options.optimizer.adamw_betas: expected two numbers in [0, 1), got [0.9]");
  CHECK(what({{"nesterov", 1}}) == "strategy.options.optimizer.nesterov: expected a boolean, got 1");
  CHECK(what({{"betas", {0.9, 0.95}}}) ==
        "strategy.options.optimizer.betas: unknown hyper-parameter of muon; known hyper-parameters: lr, momentum, "
        "nesterov, ns_steps, weight_decay, adamw_lr, adamw_betas, adamw_eps, adamw_weight_decay, adamw_params");
  CHECK(what({{"adamw_params", "head"}}) ==
        "strategy.options.optimizer.adamw_params: expected null or a list of name patterns (\"*\": any run), got "
        "\"head\"");
  CHECK(what({{"adamw_params", {""}}}) ==
        "strategy.options.optimizer.adamw_params: expected null or a list of name patterns (\"*\": any run), got "
        "[\"\"]");
  // A whole number written as a float is an integer, as in the schedules.
  CHECK(OptimizerSpec::from_json({{"name", "muon"}, {"ns_steps", 3.0}}, "o").params.at("ns_steps") == 3);
}

TEST_CASE("two Muon steps equal the reference computed in double: momentum, nesterov, Newton-Schulz, scale",
          "[sdk][optim][muon]") {
  // 3x5 is wide and 5x3 tall (transposed inside, scaled by sqrt(5/3)); the
  // 3-D tensors are viewed as [4, 6] and [6, 2]. Step 2 runs at half the
  // learning rate, as a schedule would set it.
  //
  // Tolerances: ours runs in float32 (epsilon 6e-8). Each iteration
  // multiplies an error in a small singular value by up to a = 3.4445, so
  // five of them amplify the roundings of the products by up to about 500:
  // some 1e-5 on entries of O of order 0.5. Measured, the largest difference
  // in O was 7e-6, and in the parameters (moved by lr * scale * O, at most
  // 0.13 * O, plus their own rounding) 1.2e-6; the bounds below keep a
  // margin of 4 while a wrong coefficient, scale or momentum is off by 1e-2.
  const double lr = 0.1, momentum = 0.9, weight_decay = 0.2;
  for (const bool nesterov : {true, false}) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{3, 5}, {5, 3}, {4, 2, 3}, {6, 1, 2}}) {
      INFO("nesterov " << nesterov << ", shape " << at::IntArrayRef(shape));
      at::Tensor p = wave(shape, 0.3).requires_grad_(true);
      const std::vector<at::Tensor> grads = {wave(shape, 1.1), wave(shape, 2.0).mul(3)};
      auto muon = OptimizerSpec::from_json({{"name", "muon"},
                                            {"lr", lr},
                                            {"momentum", momentum},
                                            {"nesterov", nesterov},
                                            {"weight_decay", weight_decay}},
                                           "o")
                      .build({p});
      REQUIRE(dynamic_cast<Muon*>(muon.get()) != nullptr);

      Matrix param = to_matrix(p), buffer = zeros(param.rows, param.cols);
      const double scale = std::sqrt(std::max(1.0, double(param.rows) / double(param.cols)));
      double worst_orthogonal = 0;
      for (size_t step = 0; step < grads.size(); ++step) {
        const double step_lr = step == 0 ? lr : lr / 2;
        exogym::sdk::set_lr(*muon, step_lr);
        const Matrix grad = to_matrix(grads[step]);
        buffer = combine(buffer, momentum, grad, 1);
        const Matrix update = nesterov ? combine(grad, 1, buffer, momentum) : buffer;
        const Matrix orthogonal = newton_schulz(update, 5);
        param = combine(param, 1 - step_lr * weight_decay, orthogonal, -step_lr * scale);

        // The iteration alone, in float32 on the same update.
        worst_orthogonal = std::max(
            worst_orthogonal, max_abs_diff(exogym::sdk::internal::newton_schulz5(to_tensor(update), 5), orthogonal));
        p.mutable_grad() = grads[step].clone();
        muon->step();
        CHECK(max_abs_diff(p, param) < 5e-6);
      }
      CHECK(worst_orthogonal < 3e-5);
    }
  }
}

TEST_CASE("Muon's AdamW fallback is torch::optim::AdamW bit for bit, and a schedule scales it with Muon's lr",
          "[sdk][optim][muon]") {
  at::Tensor matrix = wave({4, 3}, 0.1).requires_grad_(true);
  at::Tensor bias = wave({7}, 0.2).requires_grad_(true);
  at::Tensor their_bias = bias.detach().clone().requires_grad_(true);
  auto muon = OptimizerSpec::from_json({{"name", "muon"},
                                        {"lr", 0.02},
                                        {"adamw_lr", 3e-3},
                                        {"adamw_betas", {0.8, 0.95}},
                                        {"adamw_eps", 1e-6},
                                        {"adamw_weight_decay", 0.1}},
                                       "o")
                  .build({matrix, bias});
  torch::optim::AdamW theirs({their_bias},
                             torch::optim::AdamWOptions(3e-3).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.1));
  for (int step = 0; step < 6; ++step) {
    if (step == 3) {
      // Half Muon's base lr: the fallback runs at half of adamw_lr, exactly.
      exogym::sdk::set_lr(*muon, 0.01);
      exogym::sdk::set_lr(theirs, 1.5e-3);
      CHECK(exogym::sdk::get_lr(*muon) == 0.01);
    }
    // Tiny, ordinary and large gradients, and a zero of each sign.
    const at::Tensor grad = wave({7}, 0.5 + step).mul(step % 3 == 0 ? 1e-6 : step % 3 == 1 ? 1.0 : 1e3);
    grad[step] = step % 2 ? 0.0 : -0.0;
    matrix.mutable_grad() = wave({4, 3}, 0.7 + step);
    bias.mutable_grad() = grad.clone();
    their_bias.mutable_grad() = grad.clone();
    muon->step();
    theirs.step();
    INFO("step " << step);
    CHECK(same_bits(bias.detach(), their_bias.detach()));
  }
  StateDict ours, reference;
  exogym::sdk::save_optimizer_state(*muon, {matrix, bias}, ours, "");
  exogym::sdk::save_optimizer_state(theirs, {their_bias}, reference, "");
  CHECK(ours.at("1.step").item<int64_t>() == 6);
  CHECK(same_bits(ours.at("1.step"), reference.at("0.step")));
  CHECK(same_bits(ours.at("1.exp_avg"), reference.at("0.exp_avg")));
  CHECK(same_bits(ours.at("1.exp_avg_sq"), reference.at("0.exp_avg_sq")));
  CHECK(ours.count("0.exp_avg") == 0);  // the matrix keeps only its momentum
  CHECK(ours.count("0.momentum_buffer") == 1);
}

TEST_CASE("Muon's state survives save and load: the run continues bit for bit", "[sdk][optim][muon]") {
  // A matrix, a conv weight (4-D, viewed as 3x12), a bias, and a parameter
  // that gets no gradient until step 4 (no state saved for it).
  const std::vector<std::vector<int64_t>> shapes = {{5, 4}, {3, 2, 2, 3}, {5}, {2, 6}};
  auto make = [&] {
    std::vector<at::Tensor> params;
    for (size_t i = 0; i < shapes.size(); ++i) params.push_back(wave(shapes[i], 0.1 * double(i)).requires_grad_(true));
    return params;
  };
  const OptimizerSpec spec =
      OptimizerSpec::from_json({{"name", "muon"}, {"weight_decay", 0.01}, {"adamw_weight_decay", 0.01}}, "o");
  auto take_steps = [&](torch::optim::Optimizer& optimizer, std::vector<at::Tensor>& params, int from, int to) {
    for (int step = from; step < to; ++step) {
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() = i == 3 && step < 4 ? at::Tensor() : wave(shapes[i], 0.3 * step + double(i));
      }
      optimizer.step();
    }
  };
  std::vector<at::Tensor> whole = make(), parts = make();
  auto uninterrupted = spec.build(whole);
  take_steps(*uninterrupted, whole, 0, 7);

  auto before = spec.build(parts);
  take_steps(*before, parts, 0, 3);
  StateDict saved;
  exogym::sdk::save_optimizer_state(*before, parts, saved, "opt.");
  CHECK(saved.size() == 5);  // two momentum buffers; the bias's step, exp_avg, exp_avg_sq
  CHECK(saved.at("opt.2.step").item<int64_t>() == 3);
  CHECK(saved.count("opt.3.momentum_buffer") == 0);
  // B = (G0 * 0.95 + G1) * 0.95 + G2, in float as the optimizer rounds it.
  const at::Tensor buffer = wave(shapes[1], 0.3 * 0 + 1.0)
                                .mul(0.95f)
                                .add(wave(shapes[1], 0.3 * 1 + 1.0))
                                .mul(0.95f)
                                .add(wave(shapes[1], 0.3 * 2 + 1.0));
  CHECK(same_bits(saved.at("opt.1.momentum_buffer"), buffer));
  // Saved tensors alias the optimizer's: the new one gets copies.
  StateDict copies;
  for (const auto& [key, tensor] : saved) copies[key] = tensor.clone();
  before.reset();
  auto after = spec.build(parts);
  exogym::sdk::load_optimizer_state(*after, parts, copies, "opt.");
  take_steps(*after, parts, 3, 7);
  for (size_t i = 0; i < whole.size(); ++i) {
    INFO("parameter " << i);
    CHECK(same_bits(whole[i].detach(), parts[i].detach()));
  }
}

TEST_CASE("muon on a model without a matrix is an error at the optimizer's option", "[sdk][optim][muon]") {
  const OptimizerSpec spec = OptimizerSpec::from_json("muon", "o");
  std::vector<at::Tensor> vectors = {wave({8}, 0).requires_grad_(true), wave({1}, 0).requires_grad_(true)};
  const exogym::sdk::ConfigError error = config_error([&] { spec.build(vectors); });
  CHECK(error.path() == "optimizer");
  // As the runtime reports it when a strategy's init() throws it.
  exogym::runtime::manifest::PluginRef strategy;
  strategy.path = "strategy";
  CHECK(std::string(exogym::runtime::train::at_options(strategy, error).what()) ==
        "strategy.options.optimizer: muon needs at least one parameter with 2 or more dimensions (a weight matrix) to "
        "orthogonalise, but the 2 parameters it is given are all vectors or scalars; use adamw for this model");
  vectors.push_back(wave({2, 2}, 0).requires_grad_(true));
  CHECK_NOTHROW(spec.build(vectors));
}

TEST_CASE("Newton-Schulz on a stack of matrices is each matrix's, within rounding: wide, tall and square",
          "[sdk][optim][muon][stacked]") {
  at::manual_seed(5);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{5, 9}, {12, 4}, {6, 6}}) {
    INFO(rows << " x " << cols);
    const at::Tensor updates = at::randn({3, rows, cols});
    const at::Tensor batched = exogym::sdk::internal::newton_schulz5(updates, 5);
    REQUIRE(batched.sizes() == updates.sizes());
    for (int64_t k = 0; k < 3; ++k) {
      const at::Tensor alone = exogym::sdk::internal::newton_schulz5(updates[k], 5);
      // The same iteration, its products batched: equal up to float32 rounding.
      CHECK((batched[k] - alone).abs().max().item<double>() < 1e-5);
      CHECK(alone.abs().max().item<double>() > 0.1);
    }
  }
}
