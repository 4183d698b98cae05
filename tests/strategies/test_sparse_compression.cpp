// SparseLoCo's compression pieces (plugins/modules/compression/chunk_topk.h,
// topk_compressor.h, compressor.h's compressed_mean): the chunk-wise top-k
// against hand-picked values (ties, a short last chunk, NaN) and a full
// sort (select_topk, which DeMo's selection shares), the index
// widths, the payload's bytes against the closed form, and the average's
// values and bytes through the comm layer's accounting.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/modules/compression/elias_fano.h"
#include "exogym/modules/compression/topk_compressor.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

using exogym::sdk::QuantFormat;
using exogym::test::run_nodes;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::floats;
using exogym::test::to_vector;

namespace {

modules::SparseFormat fixed(int64_t chunk, double density, std::optional<QuantFormat> quant) {
  return {chunk, density, quant, modules::OffsetCoding::Fixed};
}

// What every node of a compressed_mean passes for one tensor.
modules::CompressedInput input(const modules::Compressor& c, const at::Tensor& t, std::vector<int64_t> shape) {
  return {c.compress(t, 0), std::move(shape), 0};
}

}  // namespace

TEST_CASE("chunk_topk keeps each chunk's ceil(density * length) largest magnitudes, lower positions on ties",
          "[sparseloco][compression]") {
  CHECK(modules::topk_per_chunk(4096, 64.0 / 4096) == 64);
  CHECK(modules::topk_per_chunk(4096, 0.03) == 123);  // 122.88, up
  CHECK(modules::topk_per_chunk(100, 0.03) == 3);     // 3.0000000000000004 is 3
  CHECK(modules::topk_per_chunk(10, 0.01) == 1);      // at least one
  CHECK(modules::topk_per_chunk(5, 1.0) == 5);
  CHECK(modules::topk_per_chunk(0, 0.5) == 0);
  CHECK(modules::topk_count(1024, 64, 0.0625) == 64);
  CHECK(modules::topk_count(1000, 64, 0.0625) == 15 * 4 + 3);  // 40 values left: ceil(2.5)
  CHECK(modules::topk_count(4, 64, 0.0625) == 1);
  CHECK(modules::chunk_index_dtype(256) == at::kByte);
  CHECK(modules::chunk_index_dtype(257) == at::kShort);
  CHECK(modules::chunk_index_dtype(32768) == at::kShort);
  CHECK(modules::chunk_index_dtype(32769) == at::kInt);
  CHECK(modules::chunk_index_bytes(4096) == 2);

  // Chunks of 4 keep 2; the last chunk (2 values) keeps ceil(1) = 1.
  const at::Tensor x = floats({1, -5, 3, 3, 0, 2, -2, 7, 4, -4}).reshape({2, 5});
  const auto top = modules::chunk_topk(x, 4, 0.5);
  CHECK(top.indices.scalar_type() == at::kByte);
  // Chunk 0: -5, then 3 (offset 2 before offset 3); chunk 1: 7, then 2
  // (offset 1 before offset 2); chunk 2: 4 (offset 0 before offset 1).
  CHECK(to_vector(top.indices) == std::vector<int64_t>{1, 2, 1, 3, 0});
  CHECK(at::equal(top.values, floats({-5, 3, 2, 7, 4})));
  CHECK(to_vector(modules::chunk_positions(top.indices, 10, 4, 0.5)) == std::vector<int64_t>{1, 2, 5, 7, 8});

  // A NaN is the largest magnitude: it is sent, not kept back.
  const auto nan = modules::chunk_topk(floats({1, NAN, 1e30f}), 3, 0.3);
  CHECK(to_vector(nan.indices) == std::vector<int64_t>{1});
  CHECK(std::isnan(nan.values[0].item<float>()));

  // Density 1 keeps everything, in order.
  const at::Tensor y = at::randn({300});
  const auto all = modules::chunk_topk(y, 128, 1.0);
  CHECK(at::equal(all.values, y));
  CHECK(at::equal(modules::chunk_positions(all.indices, 300, 128, 1.0), at::arange(300, at::kLong)));
}

TEST_CASE("select_topk, the one top-k (chunk_topk's and DeMo's), is a full sort's on chunks of any length",
          "[sparseloco][compression]") {
  // Lengths around the blocks of 16 (a partial last block, fewer blocks
  // than k, one block), k from 1 to the whole chunk; five magnitudes only,
  // so ties cross the k-th place, plus infinities and a NaN (the largest).
  at::Generator gen = at::detail::createCPUGenerator(21);
  modules::TopkScratch scratch;
  for (int64_t length : {1, 5, 16, 17, 100, 4096, 4099}) {
    for (int64_t k : {int64_t{1}, int64_t{3}, length / 2 + 1, length}) {
      if (k > length) continue;
      INFO("length " << length << ", k " << k);
      at::Tensor row = (at::randint(0, 9, {length}, gen) - 4).to(at::kFloat) * 0.5;
      if (length > 4) {
        row[length / 2] = INFINITY;
        row[length - 1] = -INFINITY;
        row[3] = NAN;
      }
      const float* v = row.data_ptr<float>();
      auto rank = [&](int64_t i) { return std::make_pair(std::isnan(v[i]), std::fabs(v[i])); };
      std::vector<int64_t> expected(length);
      std::iota(expected.begin(), expected.end(), 0);
      std::stable_sort(expected.begin(), expected.end(), [&](int64_t a, int64_t b) { return rank(a) > rank(b); });
      expected.resize(k);
      std::sort(expected.begin(), expected.end());
      std::vector<int64_t> offsets(k);
      modules::select_topk(v, length, k, offsets.data(), scratch);
      REQUIRE(offsets == expected);
    }
  }
}

TEST_CASE("chunk_topk: the same selection for any number of threads, and bad payloads are errors",
          "[sparseloco][compression]") {
  at::Generator gen = at::detail::createCPUGenerator(3);
  // Rounded to a few values: many ties.
  const at::Tensor x = at::round(at::randn({200003}, gen) * 4);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = modules::chunk_topk(x, 4096, 0.03);
  at::set_num_threads(4);
  const auto four = modules::chunk_topk(x, 4096, 0.03);
  at::set_num_threads(threads);
  CHECK(at::equal(one.indices, four.indices));
  CHECK(at::equal(one.values, four.values));
  CHECK(one.indices.scalar_type() == at::kShort);
  CHECK(one.values.numel() == modules::topk_count(200003, 4096, 0.03));

  REQUIRE_THROWS_WITH(modules::chunk_topk(x, 0, 0.5), Catch::Contains("outside 1 .. 2^31"));
  REQUIRE_THROWS_WITH(modules::chunk_topk(x, 64, 0.0), Catch::Contains("outside (0, 1]"));
  REQUIRE_THROWS_WITH(modules::chunk_positions(at::zeros({3}, at::kByte), 10, 4, 0.5),
                      "chunk top-k: expected 5 offsets for 10 values in chunks of 4");
  REQUIRE_THROWS_WITH(modules::chunk_positions(at::full({5}, 2, at::kByte), 10, 4, 0.5),
                      "chunk top-k: offset 2 outside chunk 2 of 2 values");
}

TEST_CASE("top-k payloads hold exactly the closed form: offsets, packed values and one scale per chunk",
          "[sparseloco][compression]") {
  // 1000 values in chunks of 64 at density 1/16: 63 kept (above), uint8
  // offsets; int2 packs 4 per byte; 16 chunks, 16 scales.
  CHECK(modules::ChunkTopKCompressor(fixed(64, 0.0625, QuantFormat::Int2)).bytes(1000) == 63 + 16 + 16 * 4);
  CHECK(modules::ChunkTopKCompressor(fixed(64, 0.0625, std::nullopt)).bytes(1000) == 63 + 63 * 4);
  // Elias-Fano: 15 full chunks of 64 keeping 4 (l = 4: 16 + 4 + 4 bits)
  // and 40 values keeping 3 (l = 3: 9 + 3 + 5 bits): 377 bits, 48 bytes.
  CHECK(modules::ChunkTopKCompressor({64, 0.0625, QuantFormat::Int2}).bytes(1000) == 48 + 16 + 16 * 4);
  for (auto coding : {modules::OffsetCoding::Fixed, modules::OffsetCoding::EliasFano}) {
    for (int64_t chunk : {64, 512, 40000}) {
      for (auto quant :
           {std::optional<QuantFormat>{}, std::optional<QuantFormat>{QuantFormat::Int2},
            std::optional<QuantFormat>{QuantFormat::Int4}, std::optional<QuantFormat>{QuantFormat::Fp8E4M3}}) {
        for (int64_t n : {1, 63, 1000, 100001}) {
          const modules::ChunkTopKCompressor c({chunk, 0.03, quant, coding});
          INFO(c.describe() << ", n " << n);
          const at::Tensor x = at::randn({n});
          const auto p = c.compress(x);
          const int64_t m = modules::topk_count(n, chunk, 0.03), chunks = (n + chunk - 1) / chunk;
          const int64_t values = quant ? (m * sdk::quant_bits(*quant) + 7) / 8 + 4 * chunks : 4 * m;
          const int64_t offsets = coding == modules::OffsetCoding::Fixed ? m * modules::chunk_index_bytes(chunk)
                                                                         : modules::elias_fano_bytes(n, chunk, 0.03);
          CHECK(p.bytes() == offsets + values);
          CHECK(p.bytes() == c.bytes(n));
          // Either coding stands for the same positions and values.
          const auto top = modules::chunk_topk(x, chunk, 0.03);
          at::Tensor expected = at::zeros({n});
          if (!quant) expected.index_put_({modules::chunk_positions(top.indices, n, chunk, 0.03)}, top.values);
          if (!quant) CHECK(at::equal(c.decompress(p, n, 0), expected));
        }
      }
    }
  }
}

TEST_CASE("compressed_mean of top-k payloads scatter-adds every rank's kept values in rank order and divides by R",
          "[sparseloco][compression]") {
  // Chunks of 4 keep 2. Node 0 keeps {1, 2} at 0, 3 and {0, 3} at 4, 5 (a
  // zero wins its tie by position); node 1 {0, 4} at 0, 1 and {5, 6} at 4,
  // 7; node 2 {8, 8} at 0, 1 and {-1, -1} at 4, 5.
  const int K = 3;
  const std::vector<at::Tensor> x = {floats({1, 0, 0, 2, 0, 3, 0, 0}), floats({0, 4, 0, 0, 5, 0, 0, 6}),
                                     floats({8, 8, 8, 8, -1, -1, -1, -1})};
  const at::Tensor expected = floats({9, 12, 0, 2, 4, 2, 0, 6}).div_(3.0).reshape({2, 4});
  std::vector<at::Tensor> exact(K), low_bit(K);
  run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    const modules::ChunkTopKCompressor f({4, 0.5, std::nullopt});
    exact[rank] = modules::compressed_mean(comm, f, {input(f, x[rank], {2, 4})}).at(0);
    const modules::ChunkTopKCompressor q({4, 0.5, QuantFormat::Int2});
    low_bit[rank] = modules::compressed_mean(comm, q, {input(q, x[rank] * (rank + 0.3), {8})}).at(0);
  });
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    CHECK(at::equal(exact[r], expected));
    CHECK(at::equal(low_bit[r], low_bit[0]));  // the same bits on every node
  }
  // int2: each chunk's two kept values are its scale times +-1.5 or +-0.5.
  CHECK_FALSE(at::equal(low_bit[0], expected.reshape({8})));
}

TEST_CASE("compressed_mean of top-k payloads sends exactly the payloads' bytes through the comm layer's accounting",
          "[sparseloco][compression][accounting]") {
  const int K = 4;
  const sim::NetworkModel network(K, sim::Link{1e6, 0.01});
  const sim::ComputeModel compute{0.0, {}};
  sim::ClockExchange clocks(K);
  std::vector<sim::Traffic> traffic(K);
  std::vector<int64_t> calls(K);
  const modules::ChunkTopKCompressor f(fixed(512, 0.03, QuantFormat::Int2));
  run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    sim::NodeMeter meter(rank, network, compute, clocks);
    sim::MeteredCommunicator metered(comm, meter, sim::TrafficSource::Strategy);
    const std::vector<at::Tensor> t = {at::randn({1000}), at::randn({7, 9})};
    modules::compressed_mean(metered, f, {input(f, t[0], {1000}), input(f, t[1], {7, 9})});
    traffic[rank] = meter.traffic(sim::TrafficSource::Strategy);
    calls[rank] = meter.collectives(sim::TrafficSource::Strategy);
  });
  // 1000 values: chunks of 512 and 488 keep 16 and 15: 31 int16 offsets,
  // 8 bytes of codes, 2 scales. 63 values: one chunk keeping 2: 2 offsets,
  // 1 byte, 1 scale.
  const double S = (31 * 2 + 8 + 2 * 4) + (2 * 2 + 1 + 4);
  CHECK(S == f.bytes(1000) + f.bytes(63));
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    CHECK(traffic[r].sent == (K - 1) * S);
    CHECK(traffic[r].received == (K - 1) * S);
    CHECK(calls[r] == 1);
  }
}
