// Averaging low-bit payloads across nodes (sdk/quantized_comm.h): the exact
// mean of what was sent, the same bits on every node, the exact bytes the
// comm layer's accounting counts, and a saved handle that loads back. Error
// feedback, and the compression library's average built on this, are
// tested in tests/strategies (test_error_feedback.cpp, test_compressors.cpp).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/quantized_comm.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::QuantFormat;
using exogym::test::run_nodes;
namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::kEveryQuantFormat;

namespace {

// Node `rank`'s tensors: a vector, a matrix and a bf16 vector, different
// on every node.
std::vector<at::Tensor> quantized_tensors(int rank, int round = 0) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * round + rank);
  return {at::randn({37}, gen), at::randn({5, 7}, gen) * (rank + 1), at::randn({19}, gen).to(at::kBFloat16)};
}

// Each tensor quantised in `format`, blocks of `block`: what
// quantized_mean_async averages.
std::vector<sdk::QuantizedPayload> quantized_payloads_of(const std::vector<at::Tensor>& tensors, QuantFormat format,
                                                         int64_t block) {
  std::vector<sdk::QuantizedPayload> payloads;
  for (const auto& t : tensors) payloads.push_back(sdk::quantize(t, format, block));
  return payloads;
}

// What K metered nodes send and receive for two means by `collective`:
// 1000 values as fp4 in blocks of 32, 10 as int8 in blocks of 4.
struct MeteredMeans {
  std::vector<sim::Traffic> traffic;
  std::vector<double> cluster;
  std::vector<int64_t> calls;
};

MeteredMeans metered_means(int K, sdk::QuantCollective collective) {
  const sim::NetworkModel network(K, sim::Link{1e6, 0.01});
  const sim::ComputeModel compute{0.0, {}};
  sim::ClockExchange clocks(K);
  MeteredMeans out{std::vector<sim::Traffic>(K), std::vector<double>(K), std::vector<int64_t>(K)};
  run_nodes(K, 3, [&](int rank, sdk::Communicator& comm) {
    sim::NodeMeter meter(rank, network, compute, clocks);
    sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
    sdk::quantized_mean_async(metered, {sdk::quantize(at::randn({1000}), QuantFormat::Fp4E2M1, 32)}, collective).wait();
    sdk::quantized_mean_async(metered, {sdk::quantize(at::randn({10}), QuantFormat::Int8, 4)}, collective).wait();
    out.traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    out.cluster[rank] = meter.cluster_sent(sim::TrafficSource::Strategy);
    out.calls[rank] = meter.collectives(sim::TrafficSource::Strategy);
  });
  return out;
}

}  // namespace

TEST_CASE(
    "quantized_mean_async's gather is the rank-ordered mean of the dequantised inputs, the same bits on every node",
    "[quantize][collectives]") {
  const int K = 4;
  for (QuantFormat f : kEveryQuantFormat) {
    INFO(sdk::to_string(f));
    std::vector<std::vector<at::Tensor>> results(K);
    run_nodes(K, 2, [&](int rank, sdk::Communicator& comm) {
      results[rank] = sdk::quantized_mean_async(comm, quantized_payloads_of(quantized_tensors(rank), f, 8),
                                                sdk::QuantCollective::Gather)
                          .wait();
    });
    // What every node sent, dequantised, summed in rank order in fp32 and
    // divided by K.
    for (size_t i = 0; i < 3; ++i) {
      at::Tensor sum;
      for (int r = 0; r < K; ++r) {
        const at::Tensor v = sdk::dequantize_float(sdk::quantize(quantized_tensors(r)[i], f, 8));
        sum = r == 0 ? v : sum + v;
      }
      const at::Tensor expected = (sum / K).to(quantized_tensors(0)[i].scalar_type());
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
    "quantized_mean_async started and waited for later gives the same bits, and a saved handle loads back "
    "to the same mean by itself",
    "[quantize][collectives][overlap]") {
  const int K = 3;
  for (auto collective : {sdk::QuantCollective::Gather, sdk::QuantCollective::ReduceScatter})
    for (QuantFormat f : {QuantFormat::Fp4E2M1, QuantFormat::Int8}) {
      INFO(sdk::to_string(f) << " " << sdk::to_string(collective));
      const bool gather = collective == sdk::QuantCollective::Gather;
      const std::string layout_key = gather ? "q.quantized_mean" : "q.quantized_reduce_scatter";
      std::vector<std::vector<at::Tensor>> blocking(K), async(K), reloaded(K);
      run_nodes(K, 2, [&](int rank, sdk::Communicator& comm) {
        blocking[rank] =
            sdk::quantized_mean_async(comm, quantized_payloads_of(quantized_tensors(rank), f, 8), collective).wait();
        auto pending =
            sdk::quantized_mean_async(comm, quantized_payloads_of(quantized_tensors(rank), f, 8), collective);
        LOCKED(CHECK(pending.valid()));
        // What a checkpoint keeps, taken back by a fresh handle (test doubles
        // complete at once: their record is empty). The reduce-scatter keeps
        // its all_to_all's record too.
        sdk::StateDict saved;
        pending.save(saved, "q.");
        LOCKED(CHECK(saved.count("q.work") == 1));
        LOCKED(CHECK(saved.count("q.work.before") == (gather ? 0 : 1)));
        // The handle saves what the mean needs (format, block, shapes, dtypes).
        auto back = sdk::Pending::load(saved, "q.", comm);
        sdk::StateDict damaged = saved;
        damaged[layout_key] = damaged[layout_key].slice(0, 0, 4);
        LOCKED(CHECK_THROWS_WITH(sdk::Pending::load(damaged, "q.", comm),
                                 Catch::Contains("\"" + layout_key + "\" is not a quantized mean's layout")));
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

TEST_CASE("quantized_mean_async's gather sends exactly the packed codes and scales through the comm layer's accounting",
          "[quantize][accounting]") {
  const int K = 3;
  const auto [traffic, cluster, calls] = metered_means(K, sdk::QuantCollective::Gather);
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

TEST_CASE(
    "quantized_mean_async's reduce-scatter: node p averages chunk p of every node's payload and quantises it once "
    "more, the same bits on every node",
    "[quantize][collectives]") {
  for (int K : {3, 4}) {
    for (QuantFormat f : kEveryQuantFormat) {
      INFO(sdk::to_string(f) << " K = " << K);
      std::vector<std::vector<at::Tensor>> results(K);
      run_nodes(K, 2, [&](int rank, sdk::Communicator& comm) {
        results[rank] = sdk::quantized_mean_async(comm, quantized_payloads_of(quantized_tensors(rank), f, 8)).wait();
      });
      for (size_t i = 0; i < 3; ++i) {
        // The chunks by the documented rule, each node's chunk quantised
        // alone (its blocks are the whole tensor's), averaged in rank order
        // in fp32, quantised again.
        const int64_t n = quantized_tensors(0)[i].numel();
        const int64_t c = sdk::quant_chunk_length(n, K, f, 8);
        CHECK(c % 8 == 0);
        std::vector<at::Tensor> chunks;
        for (int p = 0; p < K; ++p) {
          const int64_t begin = std::min(n, p * c), end = std::min(n, (p + 1) * c);
          at::Tensor sum;
          for (int r = 0; r < K; ++r) {
            const at::Tensor v =
                sdk::dequantize_float(sdk::quantize(quantized_tensors(r)[i].reshape({-1}).slice(0, begin, end), f, 8));
            sum = r == 0 ? v : sum + v;
          }
          chunks.push_back(sdk::dequantize_float(sdk::quantize(sum / K, f, 8)));
        }
        const at::Tensor expected =
            at::cat(chunks).reshape(quantized_tensors(0)[i].sizes()).to(quantized_tensors(0)[i].scalar_type());
        for (int r = 0; r < K; ++r) {
          INFO("tensor " << i << " node " << r);
          CHECK(results[r][i].scalar_type() == expected.scalar_type());
          CHECK(at::equal(results[r][i], expected));
        }
      }
    }
  }
}

TEST_CASE("quant_chunk_length: whole blocks and whole bytes of codes, the last chunks short or empty", "[quantize]") {
  CHECK(sdk::quant_chunk_length(1000, 3, QuantFormat::Fp4E2M1, 32) == 352);  // 32 blocks: 11, 11, 10
  CHECK(sdk::quant_chunk_length(1024, 4, QuantFormat::Fp4E2M1, 128) == 256);
  CHECK(sdk::quant_chunk_length(10, 3, QuantFormat::Int8, 4) == 4);   // 4, 4, 2
  CHECK(sdk::quant_chunk_length(10, 16, QuantFormat::Int8, 4) == 4);  // 4, 4, 2, then empty
  CHECK(sdk::quant_chunk_length(7, 2, QuantFormat::Int2, 3) == 12);   // blocks of 3 in bytes of 4 values
  CHECK(sdk::quant_chunk_length(0, 4, QuantFormat::Int8, 128) == 0);
}

TEST_CASE("quantized_mean_async's reduce-scatter sends a ring all-reduce's bytes in low bits, chunk by chunk",
          "[quantize][accounting]") {
  const int K = 3;
  const auto [traffic, cluster, calls] = metered_means(K, sdk::QuantCollective::ReduceScatter);
  // Chunks of 1000 fp4 values in blocks of 32: 352, 352, 296 values, i.e.
  // 176 + 11 * 4 = 220, 220 and 148 + 10 * 4 = 188 bytes; of 10 int8 values
  // in blocks of 4: 4, 4, 2 values, 8, 8 and 6 bytes. Node p's chunks:
  const double chunk[K] = {220 + 8, 220 + 8, 188 + 6};
  const double S = chunk[0] + chunk[1] + chunk[2];  // 650: the gather's payload
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    // all_to_all: every chunk but its own out, its own K - 1 times in; then
    // the ring all_gather of the mean chunks: every chunk but its
    // successor's out, every one but its own in.
    CHECK(traffic[r].sent == (S - chunk[r]) + (S - chunk[(r + 1) % K]));
    CHECK(traffic[r].received == (K - 1) * chunk[r] + (S - chunk[r]));
    // Over the cluster exactly 2 (K-1) S: a ring all-reduce's 2 (K-1)/K S per node.
    CHECK(cluster[r] == 2 * (K - 1) * S);
    CHECK(calls[r] == 4);  // an all_to_all and an all_gather per mean
  }
}

TEST_CASE(
    "docs/compression.md's table: against an fp32 ring all-reduce, the reduce-scatter sends b / 4 at every K, the "
    "gather b K / 8",
    "[quantize][accounting]") {
  for (int K : {2, 4, 8, 16, 32, 64}) {
    for (auto [f, b] : {std::pair<QuantFormat, double>{QuantFormat::Fp4E2M1, 0.53125}, {QuantFormat::Int8, 1.03125}}) {
      INFO("K = " << K << " " << sdk::to_string(f));
      const int64_t N = K * 128 * 2;  // chunks of whole blocks
      const double fp32 = 2.0 * (K - 1) / K * 4 * N;
      for (auto collective : {sdk::QuantCollective::ReduceScatter, sdk::QuantCollective::Gather}) {
        const sim::NetworkModel network(K, sim::Link{1e9, 0.0});
        const sim::ComputeModel compute{0.0, {}};
        sim::ClockExchange clocks(K);
        std::vector<double> sent(K);
        run_nodes(K, 4, [&](int rank, sdk::Communicator& comm) {
          sim::NodeMeter meter(rank, network, compute, clocks);
          sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
          sdk::quantized_mean_async(metered, {sdk::quantize(at::randn({N}), f, 128)}, collective).wait();
          sent[rank] = meter.traffic(sim::TrafficSource::Strategy).sent;
        });
        const double share = collective == sdk::QuantCollective::Gather ? b * K / 8 : b / 4;
        for (int r = 0; r < K; ++r) CHECK(sent[r] / fp32 == Approx(share).epsilon(1e-12));
      }
    }
  }
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
  // blocks of 128: 544 + 20 + 68 + 6 bytes per step, reduce-scattered:
  // 2 (K-1) times that over the cluster.
  const double payload = (512 + 4 * 8) + (16 + 4) + (64 + 4) + (2 + 4);
  const auto summary = nlohmann::json::parse(exogym::test::read_text(dir / "whole" / "summary.json"))["communication"];
  CHECK(summary["bytes_sent_total"].get<double>() == 12 * 2 * (K - 1) * payload);
  CHECK(summary["bytes_sent_per_node"].get<double>() == 12 * 2.0 * (K - 1) / K * payload);
  // Node 0 owns the chunks of the three small tensors: 136 + 94 bytes
  // against 136 for the others. It sends every chunk but its own, then
  // every mean chunk but its successor's.
  const auto& per_node = summary["per_node"];
  REQUIRE(per_node.size() == 4);
  CHECK(per_node[0]["bytes_sent"].get<double>() == 12 * ((payload - 230) + (payload - 136)));
  CHECK(per_node[3]["bytes_sent"].get<double>() == 12 * ((payload - 136) + (payload - 230)));
  // Stopped at 7 (not a multiple of the checkpoint interval) and resumed:
  // the same run, error-feedback residuals included.
  m["train"]["max_steps"] = 7;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=12"});
  exogym::test::require_same_run(dir / "whole", dir / "parts");
}
