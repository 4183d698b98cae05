// Averaging low-bit payloads across nodes (sdk/quantized_comm.h): the exact
// mean of what was sent, the same bits on every node, the exact bytes the
// comm layer's accounting counts; error feedback (sdk/error_feedback.h) and
// its checkpoints.
#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/error_feedback.h"
#include "exogym/sdk/quantized_comm.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "testing.h"

using exogym::sdk::QuantFormat;
using exogym::test::run_nodes;
namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;

namespace {

const std::vector<QuantFormat> kFormats = {QuantFormat::Fp8E4M3, QuantFormat::Fp8E5M2, QuantFormat::Fp4E2M1,
                                           QuantFormat::Int8,    QuantFormat::Int4,    QuantFormat::Int2};

// Node `rank`'s tensors: a vector, a matrix and a bf16 vector, different
// on every node.
std::vector<at::Tensor> node_tensors(int rank, int round = 0) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * round + rank);
  return {at::randn({37}, gen), at::randn({5, 7}, gen) * (rank + 1), at::randn({19}, gen).to(at::kBFloat16)};
}

bool same_payload(const sdk::QuantizedPayload& a, const sdk::QuantizedPayload& b) {
  return at::equal(a.codes, b.codes) && at::equal(a.scales, b.scales);
}

}  // namespace

TEST_CASE("quantized_mean_async is the rank-ordered mean of the dequantised inputs, the same bits on every node",
          "[quantize][collectives]") {
  const int K = 4;
  for (QuantFormat f : kFormats) {
    INFO(sdk::to_string(f));
    std::vector<std::vector<at::Tensor>> results(K);
    run_nodes(K, 2, [&](int rank, sdk::Communicator& comm) {
      results[rank] = sdk::quantized_mean_async(comm, node_tensors(rank), f, 8).wait();
    });
    // What every node sent, dequantised, summed in rank order in fp32 and
    // divided by K.
    for (size_t i = 0; i < 3; ++i) {
      at::Tensor sum;
      for (int r = 0; r < K; ++r) {
        const at::Tensor v = sdk::dequantize_float(sdk::quantize(node_tensors(r)[i], f, 8));
        sum = r == 0 ? v : sum + v;
      }
      const at::Tensor expected = (sum / K).to(node_tensors(0)[i].scalar_type());
      for (int r = 0; r < K; ++r) {
        INFO("tensor " << i << " node " << r);
        CHECK(results[r][i].scalar_type() == expected.scalar_type());
        CHECK(results[r][i].sizes() == expected.sizes());
        CHECK(at::equal(results[r][i], expected));
      }
    }
  }
}

TEST_CASE(
    "quantized_mean_async with error feedback: every node the same bits, what was sent plus the residual is the input",
    "[quantize][collectives]") {
  const int K = 3, rounds = 4;
  // Not int2: it has no zero, so a value far below its level (0.5 of the
  // scale) loses low bits in value - level, and sent + residual is the
  // input only up to rounding.
  for (QuantFormat f :
       {QuantFormat::Fp8E4M3, QuantFormat::Fp8E5M2, QuantFormat::Fp4E2M1, QuantFormat::Int8, QuantFormat::Int4}) {
    INFO(sdk::to_string(f));
    std::vector<std::vector<at::Tensor>> results(K);
    std::vector<int> mismatches(K, 0);  // counted on the node threads, asserted here (Catch2 3 is not thread-safe)
    run_nodes(K, 3, [&](int rank, sdk::Communicator& comm) {
      sdk::ErrorFeedback feedback;
      for (int round = 0; round < rounds; ++round) {
        const auto inputs = node_tensors(rank, round);
        std::vector<at::Tensor> before;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const at::Tensor r = feedback.residual(i);
          before.push_back(r.defined() ? r.clone() : at::zeros(inputs[i].sizes()));
        }
        for (auto& m : sdk::quantized_mean_async(comm, inputs, f, 16, &feedback).wait()) results[rank].push_back(m);
        // Re-quantising input + residual gives what was sent; sent + new
        // residual is input + old residual, exactly.
        for (size_t i = 0; i < inputs.size(); ++i) {
          const at::Tensor compensated = inputs[i].to(at::kFloat) + before[i];
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

TEST_CASE(
    "quantized_mean_async started and waited for later gives the same bits, and a saved handle loads back "
    "to the same mean by itself",
    "[quantize][collectives][overlap]") {
  const int K = 3;
  for (QuantFormat f : {QuantFormat::Fp4E2M1, QuantFormat::Int8}) {
    INFO(sdk::to_string(f));
    std::vector<std::vector<at::Tensor>> blocking(K), async(K), reloaded(K);
    run_nodes(K, 2, [&](int rank, sdk::Communicator& comm) {
      blocking[rank] = sdk::quantized_mean_async(comm, node_tensors(rank), f, 8).wait();
      auto pending = sdk::quantized_mean_async(comm, node_tensors(rank), f, 8);
      LOCKED(CHECK(pending.valid()));
      // What a checkpoint keeps, taken back by a fresh handle (test doubles
      // complete at once: their record is empty).
      sdk::StateDict saved;
      pending.save(saved, "q.");
      LOCKED(CHECK(saved.count("q.work") == 1));
      // The handle saves what the mean needs (format, block, shapes, dtypes).
      auto back = sdk::Pending::load(saved, "q.", comm);
      sdk::StateDict damaged = saved;
      damaged["q.quantized_mean"] = damaged["q.quantized_mean"].slice(0, 0, 4);
      LOCKED(CHECK_THROWS_WITH(sdk::Pending::load(damaged, "q.", comm),
                               Catch::Contains("\"q.quantized_mean\" is not a quantized mean's layout")));
      async[rank] = pending.wait();
      LOCKED(CHECK_FALSE(pending.valid()));
      reloaded[rank] = back.wait();
      LOCKED(CHECK_THROWS_AS(pending.wait(), sdk::Error));
      // Nothing saved under the prefix: a handle that holds nothing.
      LOCKED(CHECK_FALSE(sdk::Pending::load(saved, "other.", comm).valid()));
    });
    for (int r = 0; r < K; ++r) {
      for (size_t i = 0; i < 3; ++i) {
        INFO("node " << r << " tensor " << i);
        CHECK(at::equal(async[r][i], blocking[r][i]));
        CHECK(at::equal(reloaded[r][i], blocking[r][i]));
        CHECK(reloaded[r][i].scalar_type() == blocking[r][i].scalar_type());
      }
    }
  }
}

TEST_CASE("quantized_mean_async sends exactly the packed codes and scales through the comm layer's accounting",
          "[quantize][accounting]") {
  const int K = 3;
  const sim::NetworkModel network(K, sim::Link{1e6, 0.01});
  const sim::ComputeModel compute{0.0, {}};
  sim::ClockExchange clocks(K);
  std::vector<sim::Traffic> traffic(K);
  std::vector<double> cluster(K);
  std::vector<int64_t> calls(K);
  run_nodes(K, 3, [&](int rank, sdk::Communicator& comm) {
    sim::NodeMeter meter(rank, network, compute, clocks);
    sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
    // 1000 values as fp4 in blocks of 32, 10 as int8 in blocks of 4.
    sdk::quantized_mean_async(metered, {at::randn({1000})}, QuantFormat::Fp4E2M1, 32).wait();
    sdk::quantized_mean_async(metered, {at::randn({10})}, QuantFormat::Int8, 4).wait();
    traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    cluster[rank] = meter.cluster_sent(sim::TrafficSource::Strategy);
    calls[rank] = meter.collectives(sim::TrafficSource::Strategy);
  });
  // Payloads: 500 + 32 * 4 = 628 bytes and 10 + 3 * 4 = 22 bytes; a ring
  // all_gather sends and receives (K-1) times the payload per node.
  const double fp4 = 500 + 32 * 4, int8 = 10 + 3 * 4;
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    CHECK(traffic[r].sent == (K - 1) * (fp4 + int8));
    CHECK(traffic[r].received == (K - 1) * (fp4 + int8));
    CHECK(cluster[r] == K * (K - 1) * (fp4 + int8));
    CHECK(calls[r] == 2);  // one all_gather per quantized_mean
  }
}

TEST_CASE("error feedback: a checkpoint's residuals continue the run bit for bit", "[quantize][checkpoint]") {
  exogym::test::TempDir dir("error-feedback");
  for (float decay : {1.0f, 0.9f}) {
    INFO("decay " << decay);
    auto inputs = [](int step) {
      at::Generator gen = at::detail::createCPUGenerator(step);
      return std::vector<at::Tensor>{at::randn({300}, gen), at::randn({4, 9}, gen).to(at::kBFloat16)};
    };
    auto run = [&](sdk::ErrorFeedback& feedback, int from, int to) {
      std::vector<sdk::QuantizedPayload> sent;
      for (int step = from; step < to; ++step) {
        const auto x = inputs(step);
        for (size_t i = 0; i < x.size(); ++i) sent.push_back(feedback.quantize(i, x[i], QuantFormat::Int4, 32));
      }
      return sent;
    };
    sdk::ErrorFeedback straight(decay);
    const auto all = run(straight, 0, 10);

    sdk::ErrorFeedback first(decay);
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
    sdk::ErrorFeedback resumed(decay);
    resumed.load_state(loaded, "ef.");
    const auto rest = run(resumed, 5, 10);
    REQUIRE(rest.size() == 10);
    for (size_t k = 0; k < rest.size(); ++k) {
      INFO("payload " << k);
      CHECK(same_payload(rest[k], all[10 + k]));
      CHECK(rest[k].dtype == all[10 + k].dtype);
    }
    for (size_t i = 0; i < 2; ++i) CHECK(at::equal(resumed.residual(i), straight.residual(i)));
  }
}

TEST_CASE("error feedback: the average of what was sent converges to the input, without it it stays off",
          "[quantize]") {
  // A constant input fp4 cannot represent: plain quantisation repeats its
  // rounding error; with feedback, the errors cancel over the steps.
  const at::Tensor x = at::linspace(-1.3, 2.9, 64);
  sdk::ErrorFeedback feedback;
  at::Tensor with = at::zeros({64}), without = at::zeros({64});
  const int steps = 64;
  for (int step = 0; step < steps; ++step) {
    with += sdk::dequantize(feedback.quantize(0, x, QuantFormat::Fp4E2M1, 64));
    without += sdk::dequantize(sdk::quantize(x, QuantFormat::Fp4E2M1, 64));
  }
  const double with_error = (with / steps - x).abs().max().item<double>();
  const double without_error = (without / steps - x).abs().max().item<double>();
  CHECK(without_error > 0.1);
  // Sum of sent = steps * x - final residual: the error is residual / steps.
  CHECK(with_error <= feedback.residual(0).abs().max().item<double>() / steps + 1e-5);
  CHECK(with_error < without_error / 20);
}

TEST_CASE("error feedback: bad decay, state keys and shapes are errors naming what is wrong", "[quantize]") {
  CHECK_THROWS_WITH(sdk::ErrorFeedback(1.5f), Catch::Contains("decay must be in [0, 1]"));
  CHECK_THROWS_WITH(sdk::ErrorFeedback(NAN), Catch::Contains("decay must be in [0, 1]"));
  sdk::ErrorFeedback feedback;
  CHECK_THROWS_WITH(feedback.load_state({{"ef.x", at::zeros({2})}}, "ef."),
                    Catch::Contains("\"ef.x\" does not end in a slot number"));
  CHECK_THROWS_WITH(feedback.load_state({{"ef.0", at::zeros({2}, at::kLong)}}, "ef."),
                    Catch::Contains("\"ef.0\" is not a floating-point tensor"));
  // Other keys are left alone; slot 3 alone is fine.
  feedback.load_state({{"ef.3", at::ones({2})}, {"other", at::zeros({1})}}, "ef.");
  CHECK(!feedback.residual(0).defined());
  CHECK(at::equal(feedback.residual(3), at::ones({2})));
  CHECK_THROWS_WITH(feedback.quantize(3, at::zeros({3}), QuantFormat::Int8),
                    Catch::Contains("error feedback slot 3: a tensor of shape [3] after a residual of shape [2]"));
  feedback.clear();
  CHECK(!feedback.residual(3).defined());
}

TEST_CASE("a plugin averaging fp4 payloads: its bytes are the closed form, and it resumes bit for bit",
          "[quantize][checkpoint]") {
  exogym::test::TempDir dir("quantized-sgd");
  const int K = 4;
  nlohmann::json m = exogym::test::checkpointed_manifest(K, 3);
  m["strategy"] = {{"plugin", "quantized_sgd"}, {"options", {{"quantize", "fp4"}}}};
  m["train"]["max_steps"] = 12;
  exogym::test::train_into(m, dir / "whole");
  // small_manifest's MLP: tensors of 1024, 32, 128 and 4 values; fp4 in
  // blocks of 128: 544 + 20 + 68 + 6 bytes per step, sent K-1 times.
  const double payload = (512 + 4 * 8) + (16 + 4) + (64 + 4) + (2 + 4);
  const auto summary = nlohmann::json::parse(exogym::test::read_text(dir / "whole" / "summary.json"))["communication"];
  CHECK(summary["bytes_sent_per_node"].get<double>() == 12 * (K - 1) * payload);
  CHECK(summary["bytes_sent_total"].get<double>() == K * 12 * (K - 1) * payload);
  // Stopped at 7 (not a multiple of the checkpoint interval) and resumed:
  // the same run, error-feedback residuals included.
  m["train"]["max_steps"] = 7;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=12"});
  exogym::test::require_same_run(dir / "whole", dir / "parts");
}
