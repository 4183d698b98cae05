// Error feedback around a compressor (plugins/modules/compression/
// error_feedback.h): what was sent plus what is kept is what was to be sent,
// through the library's average on every node; its residuals through a
// checkpoint's file format, bit for bit; the average of what was sent
// converging to the input; errors that name what is wrong.
#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/quantize.h"
#include "helpers.h"
#include "testing.h"

using exogym::sdk::QuantFormat;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;

namespace {

// Node `rank`'s tensors in round `round`: a vector, a matrix and a bf16
// vector, different on every node.
std::vector<at::Tensor> feedback_inputs(int rank, int round) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * round + rank);
  return {at::randn({37}, gen), at::randn({5, 7}, gen) * (rank + 1), at::randn({19}, gen).to(at::kBFloat16)};
}

bool same_wire(const modules::CompressedTensor& a, const modules::CompressedTensor& b) {
  if (a.wire.size() != b.wire.size()) return false;
  for (size_t i = 0; i < a.wire.size(); ++i) {
    if (!at::equal(a.wire[i], b.wire[i])) return false;
  }
  return true;
}

}  // namespace

TEST_CASE(
    "error feedback through compressed_mean: every node the same bits, what was sent plus the residual is the input",
    "[compression][quantize][collectives]") {
  const int K = 3, rounds = 4;
  // Not int2: it has no zero, so a value far below its level (0.5 of the
  // scale) loses low bits in value - level, and sent + residual is the
  // input only up to rounding.
  for (QuantFormat f :
       {QuantFormat::Fp8E4M3, QuantFormat::Fp8E5M2, QuantFormat::Fp4E2M1, QuantFormat::Int8, QuantFormat::Int4}) {
    INFO(sdk::to_string(f));
    const modules::QuantizeCompressor quantizer(f, 16);
    std::vector<std::vector<at::Tensor>> results(K);
    std::vector<int> mismatches(K, 0);  // counted on the node threads, asserted here (Catch2 3 is not thread-safe)
    exogym::test::run_nodes(K, 3, [&](int rank, sdk::Communicator& comm) {
      modules::ErrorFeedback feedback;
      for (int round = 0; round < rounds; ++round) {
        const auto tensors = feedback_inputs(rank, round);
        std::vector<at::Tensor> before;
        std::vector<modules::CompressedInput> inputs;
        for (size_t i = 0; i < tensors.size(); ++i) {
          const at::Tensor r = feedback.residual(i);
          before.push_back(r.defined() ? r.clone() : at::zeros(tensors[i].sizes()));
          inputs.push_back({feedback.compress(i, quantizer, tensors[i]), tensors[i].sizes().vec()});
        }
        for (auto& m : modules::compressed_mean(comm, quantizer, inputs)) results[rank].push_back(m);
        // Re-quantising input + residual gives what was sent; sent + new
        // residual is input + old residual, exactly.
        for (size_t i = 0; i < tensors.size(); ++i) {
          const at::Tensor compensated = tensors[i].to(at::kFloat) + before[i];
          const at::Tensor sent = sdk::dequantize_float(sdk::quantize(compensated, f, 16));
          if (!at::equal(sent + feedback.residual(i), compensated)) ++mismatches[rank];
        }
      }
    });
    CHECK(mismatches == std::vector<int>(K, 0));
    for (int r = 1; r < K; ++r) {
      REQUIRE(results[r].size() == results[0].size());
      for (size_t i = 0; i < results[0].size(); ++i) CHECK(at::equal(results[r][i], results[0][i]));
    }
  }
}

TEST_CASE("error feedback: a checkpoint's residuals continue the run bit for bit", "[compression][checkpoint]") {
  exogym::test::TempDir dir("error-feedback");
  const modules::QuantizeCompressor int4(QuantFormat::Int4, 32);
  for (float decay : {1.0f, 0.9f}) {
    INFO("decay " << decay);
    auto inputs = [](int step) {
      at::Generator gen = at::detail::createCPUGenerator(step);
      return std::vector<at::Tensor>{at::randn({300}, gen), at::randn({4, 9}, gen).to(at::kBFloat16)};
    };
    auto run = [&](modules::ErrorFeedback& feedback, int from, int to) {
      std::vector<modules::CompressedTensor> sent;
      for (int step = from; step < to; ++step) {
        const auto x = inputs(step);
        for (size_t i = 0; i < x.size(); ++i) sent.push_back(feedback.compress(i, int4, x[i]));
      }
      return sent;
    };
    modules::ErrorFeedback straight(decay);
    const auto all = run(straight, 0, 10);

    modules::ErrorFeedback first(decay);
    run(first, 0, 5);
    // Through the checkpoints' own file format.
    sdk::StateDict saved;
    first.save_state(saved, "ef.");
    CHECK(saved.size() == 2);
    exogym::runtime::output::NamedTensors named(saved.begin(), saved.end());
    exogym::runtime::output::write_safetensors(dir / "state.safetensors", named);
    sdk::StateDict loaded;
    for (auto& [name, tensor] : exogym::runtime::output::read_safetensors(dir / "state.safetensors").tensors) {
      loaded[name] = tensor;
    }
    modules::ErrorFeedback resumed(decay);
    resumed.load_state(loaded, "ef.");
    const auto rest = run(resumed, 5, 10);
    REQUIRE(rest.size() == 10);
    for (size_t k = 0; k < rest.size(); ++k) {
      INFO("payload " << k);
      CHECK(same_wire(rest[k], all[10 + k]));
    }
    for (size_t i = 0; i < 2; ++i) CHECK(at::equal(resumed.residual(i), straight.residual(i)));
  }
}

TEST_CASE("error feedback: the average of what was sent converges to the input, without it it stays off",
          "[compression][quantize]") {
  // A constant input fp4 cannot represent: plain quantisation repeats its
  // rounding error; with feedback, the errors cancel over the steps.
  const at::Tensor x = at::linspace(-1.3, 2.9, 64);
  const modules::QuantizeCompressor fp4(QuantFormat::Fp4E2M1, 64);
  modules::ErrorFeedback feedback;
  at::Tensor with = at::zeros({64}), without = at::zeros({64});
  const int steps = 64;
  for (int step = 0; step < steps; ++step) {
    with += fp4.decompress(feedback.compress(0, fp4, x), 64, 0);
    without += fp4.decompress(fp4.compress(x), 64, 0);
  }
  const double with_error = (with / steps - x).abs().max().item<double>();
  const double without_error = (without / steps - x).abs().max().item<double>();
  CHECK(without_error > 0.1);
  // Sum of sent = steps * x - final residual: the error is residual / steps.
  CHECK(with_error <= feedback.residual(0).abs().max().item<double>() / steps + 1e-5);
  CHECK(with_error < without_error / 20);
}

TEST_CASE("error feedback: bad decay, state keys and shapes are errors naming what is wrong", "[compression]") {
  CHECK_THROWS_WITH(modules::ErrorFeedback(1.5f), Catch::Contains("decay must be in [0, 1]"));
  CHECK_THROWS_WITH(modules::ErrorFeedback(NAN), Catch::Contains("decay must be in [0, 1]"));
  modules::ErrorFeedback feedback;
  CHECK_THROWS_WITH(feedback.load_state({{"ef.x", at::zeros({2})}}, "ef."),
                    Catch::Contains("\"ef.x\" does not end in a slot number"));
  CHECK_THROWS_WITH(feedback.load_state({{"ef.0", at::zeros({2}, at::kLong)}}, "ef."),
                    Catch::Contains("\"ef.0\" is not a floating-point tensor"));
  // Other keys are left alone; slot 3 alone is fine.
  feedback.load_state({{"ef.3", at::ones({2})}, {"other", at::zeros({1})}}, "ef.");
  CHECK(!feedback.residual(0).defined());
  CHECK(at::equal(feedback.residual(3), at::ones({2})));
  const modules::QuantizeCompressor int8(QuantFormat::Int8);
  CHECK_THROWS_WITH(feedback.compress(3, int8, at::zeros({3})),
                    Catch::Contains("error feedback slot 3: a tensor of shape [3] after a residual of shape [2]"));
  feedback.clear();
  CHECK(!feedback.residual(3).defined());
}
