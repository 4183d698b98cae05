// The compression library (plugins/modules/compression/compressor.h and the
// compressors): Elias-Fano offsets against their closed form and bad codes,
// random-k's shared positions, scaled sign and the low-bit formats against
// hand-computed values, every compressor's bytes against its closed form,
// error feedback's identity (what was sent plus what is kept is what was to
// be sent), top-k at density 1 against the plain average bit for bit,
// random-k's all_reduce against the gathered average, with its bytes, and
// compressed_mean_async against compressed_mean for every way of averaging.
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/modules/compression/elias_fano.h"
#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/make_compressor.h"
#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/modules/compression/random_k.h"
#include "exogym/modules/compression/sign_compressor.h"
#include "exogym/modules/compression/topk_compressor.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "testing.h"

using exogym::sdk::QuantFormat;
using exogym::test::run_nodes;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::floats;
using exogym::test::to_vector;

namespace {

// Random-k in fp32 as a compressor that does not say it is summable, so
// compressed_mean gathers its payloads.
class GatheredRandomK final : public modules::Compressor {
 public:
  explicit GatheredRandomK(const modules::RandomKCompressor& inner) : inner_(inner) {}
  modules::CompressedTensor compress(const at::Tensor& t, uint64_t seed) const override {
    return inner_.compress(t, seed);
  }
  void add_to(at::Tensor& dense, const modules::CompressedTensor& p, uint64_t seed) const override {
    inner_.add_to(dense, p, seed);
  }
  int64_t bytes(int64_t numel) const override { return inner_.bytes(numel); }
  std::string describe() const override { return "gathered " + inner_.describe(); }

 private:
  const modules::RandomKCompressor& inner_;
};

}  // namespace

TEST_CASE("Elias-Fano offsets take their closed form and decode to what chunk_topk chose", "[compression]") {
  // 123 of 4096 (3 %): l = 5, 615 low bits, 123 + 127 + 1 high bits.
  CHECK(modules::elias_fano_bits(4096, 123) == 866);
  CHECK(modules::elias_fano_bits(4096, 64) == 64 * 6 + 64 + 63 + 1);  // l = 6
  CHECK(modules::elias_fano_bits(5, 5) == 5 + 4 + 1);                 // every offset: l = 0
  CHECK(modules::elias_fano_bits(1, 1) == 2);
  CHECK(modules::elias_fano_bits(0, 0) == 0);
  // 10000 values in chunks of 4096 at 3 %: two chunks of 866 bits and 1808
  // values keeping 55 (l = 5: 275 + 55 + 57 bits).
  CHECK(modules::elias_fano_bytes(10000, 4096, 0.03) == (2 * 866 + 275 + 55 + 57 + 7) / 8);

  at::Generator gen = at::detail::createCPUGenerator(5);
  for (int64_t chunk : {1, 7, 64, 4096}) {
    for (double density : {0.01, 0.03, 0.5, 1.0}) {
      for (int64_t n : {1, 100, 10000}) {
        INFO("chunk " << chunk << " density " << density << " n " << n);
        const auto top = modules::chunk_topk(at::randn({n}, gen), chunk, density);
        const at::Tensor code = modules::elias_fano_encode(top.indices, n, chunk, density);
        CHECK(code.numel() == modules::elias_fano_bytes(n, chunk, density));
        CHECK(to_vector(modules::elias_fano_decode(code, n, chunk, density)) == to_vector(top.indices));
      }
    }
  }

  // Codes from elsewhere: of another size, or with an offset too many, out
  // of its chunk or out of order.
  const auto top = modules::chunk_topk(floats({0, 5, 0, 6, 0, 0, 7, 0}), 8, 0.375);  // 1, 3, 6: l = 1
  const at::Tensor code = modules::elias_fano_encode(top.indices, 8, 8, 0.375);
  REQUIRE(code.numel() == 2);  // 3 low bits + 3 + 3 + 1 high bits
  REQUIRE_THROWS_WITH(modules::elias_fano_decode(code.slice(0, 0, 1), 8, 8, 0.375),
                      "Elias-Fano offsets: expected 2 bytes (uint8) for 8 values in chunks of 8");
  at::Tensor extra = code.clone();
  extra[1] = extra[1].item<uint8_t>() | 0x02;  // one more high bit set
  REQUIRE_THROWS_WITH(modules::elias_fano_decode(extra, 8, 8, 0.375), Catch::Contains("more than 3 offsets"));
  at::Tensor far = at::zeros({2}, at::kByte);
  far[0] = 0x3F;  // low bits 1, 1, 1; high bits 0, 1, 2 set: high parts 0, 0, 0, so offsets 1, 1, 1
  REQUIRE_THROWS_WITH(modules::elias_fano_decode(far, 8, 8, 0.375), Catch::Contains("out of ascending order"));
}

TEST_CASE("random-k draws the same positions on every node from the shared seed, k per chunk", "[compression]") {
  const modules::RandomKCompressor c(100, 0.05, std::nullopt);
  const at::Tensor p = c.positions(1030, 42);
  REQUIRE(p.numel() == 10 * 5 + 2);  // ceil(0.05 * 30) = 2 in the last chunk
  CHECK(at::equal(p, c.positions(1030, 42)));
  CHECK_FALSE(at::equal(p, c.positions(1030, 43)));
  const auto at = to_vector(p);
  for (size_t j = 0; j < at.size(); ++j) {
    const int64_t chunk = j < 50 ? static_cast<int64_t>(j) / 5 : 10;
    CHECK(at[j] / 100 == chunk);  // k in each chunk
    if (j > 0) CHECK(at[j] > at[j - 1]);
  }
  // The values travel without positions: 4 bytes each, or int2 codes and
  // one scale per chunk.
  const at::Tensor x = at::randn({1030});
  const auto payload = c.compress(x, 42);
  CHECK(payload.bytes() == 52 * 4);
  CHECK(c.bytes(1030) == 52 * 4);
  CHECK(at::equal(payload.wire.at(0), x.index_select(0, p)));
  const modules::RandomKCompressor q(100, 0.05, QuantFormat::Int2);
  CHECK(q.bytes(1030) == 13 + 11 * 4);
  CHECK(q.compress(x, 42).bytes() == q.bytes(1030));
  // Every subset equally likely: over many seeds each offset of a chunk of
  // 10 keeping 3 is drawn about 30 % of the time.
  const modules::RandomKCompressor small(10, 0.3, std::nullopt);
  std::vector<int> drawn(10);
  for (uint64_t seed = 0; seed < 20000; ++seed) {
    for (int64_t offset : to_vector(small.positions(10, seed))) ++drawn[static_cast<size_t>(offset)];
  }
  for (int count : drawn) CHECK(std::abs(count - 6000) < 300);
}

TEST_CASE("scaled sign sends a bit per value and each block's mean magnitude", "[compression]") {
  const modules::SignCompressor c(4);
  const at::Tensor x = floats({1, -3, 0, -0.0f, 2, 2, -2});  // blocks of 4 and 3
  const auto payload = c.compress(x);
  REQUIRE(payload.wire.size() == 2);
  CHECK(payload.wire[0].item<uint8_t>() == 0b01001010);  // values 1, 3 and 6 are negative
  CHECK(at::equal(payload.wire[1], floats({1.0f, 2.0f})));
  CHECK(payload.bytes() == 1 + 2 * 4);
  CHECK(c.bytes(7) == 9);
  CHECK(c.bytes(1000) == 125 + 250 * 4);
  CHECK(at::equal(c.decompress(payload, 7, 0), floats({1, -1, 1, -1, 2, 2, -2})));
  // A non-finite value makes its block's scale non-finite.
  const at::Tensor nan = c.decompress(c.compress(floats({1, NAN, 1, 1, 1})), 5, 0);
  CHECK(std::isnan(nan[0].item<float>()));
  CHECK(nan[4].item<float>() == 1);
  REQUIRE_THROWS_WITH(c.decompress(payload, 9, 0), Catch::Contains("sign payload: expected 2 bytes of signs"));
  REQUIRE_THROWS_WITH(modules::SignCompressor(0), Catch::Contains("below 1"));
}

TEST_CASE("the quantize compressor is sdk::quantize, and every compressor's payload is its closed form",
          "[compression]") {
  const at::Tensor x = at::randn({3, 333});
  const modules::QuantizeCompressor fp4(QuantFormat::Fp4E2M1, 64);
  const auto payload = fp4.compress(x);
  const sdk::QuantizedPayload q = sdk::quantize(x, QuantFormat::Fp4E2M1, 64);
  CHECK(at::equal(payload.wire.at(0), q.codes));
  CHECK(at::equal(fp4.decompress(payload, x.numel(), 0), sdk::dequantize_float(q).reshape({-1})));
  CHECK(fp4.bytes(999) == 500 + 16 * 4);

  at::Generator gen = at::detail::createCPUGenerator(9);
  for (const char* name : {"topk", "random_k", "sign", "quantize"}) {
    for (auto quant : {std::optional<QuantFormat>{}, std::optional<QuantFormat>{QuantFormat::Int4}}) {
      if (std::string(name) == "quantize" && !quant) continue;
      modules::CompressorChoice choice{name, 256, 0.02, quant, modules::OffsetCoding::EliasFano};
      const auto c = modules::make_compressor(choice, "compressor", "quantize");
      for (int64_t n : {1, 255, 257, 10000}) {
        INFO(c->describe() << ", n " << n);
        CHECK(c->compress(at::randn({n}, gen), 7).bytes() == c->bytes(n));
      }
    }
  }
  modules::CompressorChoice unknown;
  unknown.name = "dct";
  REQUIRE_THROWS_AS(modules::make_compressor(unknown, "strategy.options.compressor", "q"), sdk::ConfigError);
  modules::CompressorChoice unquantized;
  unquantized.name = "quantize";
  REQUIRE_THROWS_WITH(modules::make_compressor(unquantized, "c", "strategy.options.quantize"),
                      Catch::Contains("strategy.options.quantize") && Catch::Contains("not none"));
}

TEST_CASE(
    "compressed_mean of the quantize compressor's payloads is the SDK's low-bit reduce-scatter, or its gather when "
    "asked",
    "[compression][quantize]") {
  const int K = 3;
  const modules::QuantizeCompressor fp4(QuantFormat::Fp4E2M1, 64);
  std::vector<int> mismatches(K, 0), differs(K, 0);
  run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    at::Generator gen = at::detail::createCPUGenerator(30 + rank);
    const at::Tensor x = at::randn({3, 333}, gen);
    const auto rs = modules::compressed_mean(comm, fp4, {{fp4.compress(x), {3, 333}, 0}});
    const auto rs_sdk = sdk::quantized_mean_async(comm, {sdk::quantize(x, QuantFormat::Fp4E2M1, 64)}).wait();
    const auto g = modules::compressed_mean(comm, fp4, {{fp4.compress(x), {3, 333}, 0}}, sdk::QuantCollective::Gather);
    const auto g_sdk =
        sdk::quantized_mean_async(comm, {sdk::quantize(x, QuantFormat::Fp4E2M1, 64)}, sdk::QuantCollective::Gather)
            .wait();
    if (!at::equal(rs.at(0), rs_sdk.at(0)) || !at::equal(g.at(0), g_sdk.at(0))) ++mismatches[rank];
    // The reduce-scatter rounds the mean once more.
    if (!at::equal(rs.at(0), g.at(0))) ++differs[rank];
  });
  CHECK(mismatches == std::vector<int>(K, 0));
  CHECK(differs == std::vector<int>(K, 1));
}

TEST_CASE("error feedback around any compressor: what was sent plus what is kept is what was to be sent",
          "[compression]") {
  at::Generator gen = at::detail::createCPUGenerator(11);
  for (const char* name : {"topk", "random_k", "sign", "quantize"}) {
    modules::CompressorChoice choice{name, 64, 0.1, QuantFormat::Int8, modules::OffsetCoding::EliasFano};
    const auto c = modules::make_compressor(choice, "compressor", "quantize");
    modules::ErrorFeedback feedback(0.9f);
    at::Tensor residual = at::zeros({5, 40});
    for (uint64_t round = 0; round < 4; ++round) {
      INFO(name << " round " << round);
      const at::Tensor tensor = at::randn({5, 40}, gen);
      const at::Tensor target = tensor + residual * 0.9f;
      const auto payload = feedback.compress(0, *c, tensor, round);
      const at::Tensor sent = c->decompress(payload, 200, round).view({5, 40});
      CHECK(at::equal(feedback.residual(0), target - sent));
      CHECK(at::allclose(sent + feedback.residual(0), target, 0, 1e-6));
      CHECK(feedback.residual(0).abs().sum().item<double>() > 0);  // something was held back
      residual = feedback.residual(0).clone();
    }
  }
}

TEST_CASE(
    "top-k at density 1 in fp32 averages as all_reduce does, bit for bit, and random-k's all_reduce gives "
    "the gathered bits at 2 (K-1) / K of the bytes",
    "[compression][accounting]") {
  const int K = 3;
  const sim::NetworkModel network(K, sim::Link{1e6, 0.01});
  const sim::ComputeModel compute{0.0, {}};
  sim::ClockExchange clocks(K);
  const modules::ChunkTopKCompressor all({64, 1.0, std::nullopt});
  const modules::RandomKCompressor random_k(64, 0.25, std::nullopt);
  const GatheredRandomK gathered(random_k);
  std::vector<sim::Traffic> summed_traffic(K), gathered_traffic(K);
  run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    at::Generator gen = at::detail::createCPUGenerator(20 + rank);
    const at::Tensor x = at::randn({5, 30}, gen), y = at::randn({100}, gen);
    // Density 1: every value sent, the mean in rank order.
    const auto dense = modules::compressed_mean(comm, all, {{all.compress(x), {5, 30}, 0}});
    std::vector<at::Tensor> reduced = {x.clone()};
    comm.all_reduce(reduced, sdk::ReduceOp::Avg);
    LOCKED(CHECK(at::equal(dense.at(0), reduced[0])));
    // Random-k: the all_reduce and the all_gather give the same bits.
    sim::NodeMeter meter(rank, network, compute, clocks);
    sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
    const auto a = modules::compressed_mean(metered, random_k, {{random_k.compress(y, 5), {100}, 5}});
    summed_traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    const auto b = modules::compressed_mean(metered, gathered, {{gathered.compress(y, 5), {100}, 5}});
    gathered_traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    LOCKED(CHECK(at::equal(a.at(0), b.at(0))));
    LOCKED(CHECK(a.at(0).ne(0).sum().item<int64_t>() == 16 + 9));  // 100 values: 64 keep 16, 36 keep 9
  });
  const double S = 25 * 4;  // 25 fp32 values
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    CHECK(summed_traffic[r].sent == Approx(2.0 * (K - 1) / K * S));
    CHECK(gathered_traffic[r].sent - summed_traffic[r].sent == Approx((K - 1) * S));
  }
}

TEST_CASE(
    "compressed_mean_async gives compressed_mean's bits and bytes for the summed, gathered and low-bit averages, "
    "and a saved handle loads back to the same means",
    "[compression][overlap][accounting]") {
  const int K = 3;
  const sim::NetworkModel network(K, sim::Link{1e6, 0.01});
  const sim::ComputeModel compute{0.0, {}};
  const modules::RandomKCompressor summed(64, 0.25, std::nullopt);
  const modules::ChunkTopKCompressor topk({64, 0.1, QuantFormat::Int8});
  const modules::QuantizeCompressor low_bit(QuantFormat::Fp4E2M1, 32);
  for (const modules::Compressor* c : std::vector<const modules::Compressor*>{&summed, &topk, &low_bit}) {
    INFO(c->describe());
    sim::ClockExchange clocks(K);
    std::vector<std::vector<at::Tensor>> blocking(K), async(K), reloaded(K);
    std::vector<sim::Traffic> blocking_traffic(K), async_traffic(K);
    run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
      at::Generator gen = at::detail::createCPUGenerator(40 + rank);
      const at::Tensor x = at::randn({7, 30}, gen), y = at::randn({100}, gen);
      const std::vector<modules::CompressedInput> inputs = {{c->compress(x, 9), {7, 30}, 9},
                                                            {c->compress(y, 10), {100}, 10}};
      sim::NodeMeter meter(rank, network, compute, clocks);
      sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
      blocking[rank] = modules::compressed_mean(metered, *c, inputs);
      blocking_traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
      sdk::Pending pending = modules::compressed_mean_async(metered, *c, inputs);
      sdk::StateDict saved;
      pending.save(saved, "mean.");
      async[rank] = pending.wait();
      async_traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
      // A fresh handle from what a checkpoint keeps (on the plain
      // communicator: the metered one's transfer has been waited for).
      reloaded[rank] = sdk::Pending::load(saved, "mean.", comm).wait();
    });
    for (int r = 0; r < K; ++r) {
      INFO("node " << r);
      REQUIRE(async[r].size() == 2);
      REQUIRE(reloaded[r].size() == 2);
      for (size_t i = 0; i < 2; ++i) {
        CHECK(async[r][i].sizes() == blocking[r][i].sizes());
        CHECK(at::equal(async[r][i], blocking[r][i]));
        CHECK(at::equal(reloaded[r][i], blocking[r][i]));
        CHECK(at::equal(blocking[r][i], blocking[0][i]));
      }
      CHECK(async_traffic[r].sent == 2 * blocking_traffic[r].sent);
      CHECK(async_traffic[r].received == 2 * blocking_traffic[r].received);
      CHECK(blocking_traffic[r].sent > 0);
    }
  }
}
