// The strategy sparseloco (plugins/modules/outer/sparseloco.h): error feedback
// and the outer step against the same exchange by hand, the equivalences
// at density 1 (with streaming_diloco's quantised outer gradients bit for
// bit, with diloco up to rounding), the bytes of whole runs against the
// closed form, and every bad input. (Resume bit for bit, failures and
// several processes: builtin_strategies in checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include "checkpoint_fixtures.h"
#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/modules/compression/topk_compressor.h"
#include "exogym/modules/outer/sparseloco.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "strategy_runs.h"
#include "tensor_model.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::bit_identical;
using exogym::test::load_model_pt;
using exogym::test::max_abs_diff;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;

using exogym::test::TensorModel;

namespace {

// Every option, as validation resolves them.
sdk::ModuleOptions sparseloco_options(json given) {
  json o = {{"H", 2},         {"compressor", "topk"}, {"chunk", 4},
            {"density", 0.5}, {"quantize", "int2"},   {"offsets", "elias_fano"},
            {"decay", 0.5},   {"outer_lr", 0.5},      {"collective", "reduce_scatter"}};
  for (auto& [key, value] : given.items()) o[key] = value;
  return sdk::ModuleOptions(o, modules::SparseLoCoModule::specs());
}

}  // namespace

TEST_CASE("sparseloco: what a node sends plus its new error buffer is decay * old buffer + pseudo-gradient",
          "[strategies][sparseloco]") {
  // K = 2, H = 2: syncs after steps 1 and 3. Before each step node r sets
  // its parameters to θ + a drift of its own; by hand, the same buffers,
  // payloads and outer SGD step (lr 0.5) on θ.
  const int K = 2;
  const double decay = 0.5, lr = 0.5;
  std::vector<double> largest_error(K);
  exogym::test::run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    sdk::NodeContext ctx;
    ctx.rank = rank;
    ctx.num_nodes = K;
    ctx.comm = &comm;
    ctx.max_steps = 4;
    // "w" of 12 floats (3 chunks of 4) and "b" of 3.
    TensorModel model({{"w", at::zeros({3, 4})}, {"b", at::zeros({3})}});
    modules::SparseLoCoModule module(sparseloco_options(json::object()));
    module.init(ctx, model);
    const modules::Compressor& f = module.compressor();
    std::vector<at::Tensor> theta = model.values(), errors = {at::zeros({3, 4}), at::zeros({3})};
    at::Generator gen = at::detail::createCPUGenerator(10 + rank);
    for (int64_t t = 0; t < 4; ++t) {
      ctx.step = t;
      const std::vector<at::Tensor> local = {theta[0] + at::randn({3, 4}, gen), theta[1] + at::randn({3}, gen)};
      model.set(local);
      module.communicate(ctx, model, t);
      if (t % 2 == 0) {
        LOCKED(CHECK(at::equal(model.values()[0], local[0])));  // not a sync step
        continue;
      }
      std::vector<modules::CompressedInput> sent;
      for (size_t i = 0; i < 2; ++i) {
        INFO("step " << t << " tensor " << i);
        const at::Tensor target = errors[i] * decay + (theta[i] - local[i]);
        sent.push_back({f.compress(target, 0), target.sizes().vec(), 0});
        const at::Tensor dense = f.decompress(sent.back().payload, target.numel(), 0).view(target.sizes());
        LOCKED(CHECK(at::equal(module.error(i), target - dense)));
        LOCKED(CHECK(at::allclose(dense + module.error(i), target, 0, 1e-6)));
        // Exactly the top-k positions were sent: half of each chunk.
        LOCKED(CHECK(dense.ne(0).sum().item<int64_t>() == modules::topk_count(target.numel(), 4, 0.5)));
        errors[i] = module.error(i).clone();
        largest_error[rank] = std::max(largest_error[rank], errors[i].abs().max().item<double>());
      }
      const auto mean = modules::compressed_mean(comm, f, sent);
      for (size_t i = 0; i < 2; ++i) {
        theta[i] = theta[i] - lr * mean[i];
        LOCKED(CHECK(at::allclose(module.global()[i].detach(), theta[i], 0, 1e-6)));
        theta[i] = module.global()[i].detach().clone();
        // Every node continues from θ.
        LOCKED(CHECK(at::equal(model.values()[i], theta[i])));
      }
    }
    sdk::StateDict state;
    module.save_state(state, "");
    LOCKED(CHECK(at::equal(state.at("error.0"), errors[0])));
    LOCKED(CHECK(at::equal(state.at("error.1"), errors[1])));
    LOCKED(CHECK(state.at("outer_step").item<int64_t>() == 3));
    // A node back after a failure gets θ, not the buffers.
    sdk::StateDict recovery;
    module.recovery_state(recovery, "");
    LOCKED(CHECK(recovery.count("error.0") == 0));
    LOCKED(CHECK(recovery.count("master.0") == 1));
  });
  for (int r = 0; r < K; ++r) CHECK(largest_error[r] > 0.1);  // half of every chunk stayed behind
}

TEST_CASE(
    "sparseloco at density 1 with int8 and decay 0 is streaming_diloco's int8 outer SGD, bit for bit, "
    "gathered or reduce-scattered",
    "[strategies][sparseloco]") {
  // Both send every value of master - local quantised to int8 in blocks of
  // 128 (sparseloco: a chunk of 128 keeps all 128, one scale per chunk),
  // average the dequantised values in rank order and step θ by outer SGD
  // without momentum. Only the bytes differ: sparseloco sends offsets.
  TempDir dir("sparseloco-streaming");
  const json adam = {{"name", "adam"}, {"lr", 1e-2}};
  const json sparse = {{"H", 5},       {"chunk", 128},    {"density", 1.0},   {"quantize", "int8"},
                       {"decay", 0.0}, {"outer_lr", 0.7}, {"optimizer", adam}};
  json streaming = {{"H", 5},
                    {"fragments", 1},
                    {"quantize", "int8"},
                    {"collective", "gather"},
                    {"outer_optimizer", {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.0}, {"nesterov", false}}},
                    {"optimizer", adam}};
  const fs::path a = train_in(with_strategy(4, "sparseloco", sparse), dir, "sparseloco");
  const fs::path b = train_in(with_strategy(4, "streaming_diloco", streaming), dir, "streaming");
  CHECK(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(b / "model.pt")));
  // The quantize compressor's dense payloads go through the same low-bit
  // reduce-scatter as streaming_diloco's default, and give its bits.
  json dense = sparse;
  dense["compressor"] = "quantize";
  streaming.erase("collective");
  const fs::path rs_sparse = train_in(with_strategy(4, "sparseloco", dense), dir, "sparseloco-rs");
  const fs::path rs_streaming = train_in(with_strategy(4, "streaming_diloco", streaming), dir, "streaming-rs");
  CHECK(bit_identical(load_model_pt(rs_sparse / "model.pt"), load_model_pt(rs_streaming / "model.pt")));
  CHECK_FALSE(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(rs_sparse / "model.pt")));
  // The error buffer at decay 0.95 carries what int8 lost, and more.
  json with_memory = sparse;
  with_memory["decay"] = 0.95;
  const fs::path c = train_in(with_strategy(4, "sparseloco", with_memory), dir, "memory");
  CHECK_FALSE(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(c / "model.pt")));
}

TEST_CASE("sparseloco at density 1 in fp32 with decay 0 and outer lr 1 is diloco with outer SGD lr 1, up to rounding",
          "[strategies][sparseloco]") {
  // DiLoCo steps θ by θ - mean(θ_r), SparseLoCo by mean(θ - θ_r): the same
  // real numbers, rounded in another order, so not bit for bit.
  TempDir dir("sparseloco-diloco");
  const json adam = {{"name", "adam"}, {"lr", 1e-2}};
  const json sgd1 = {{"name", "sgd"}, {"lr", 1.0}, {"momentum", 0.0}, {"nesterov", false}};
  const fs::path diloco =
      train_in(with_strategy(4, "diloco", {{"H", 5}, {"outer_optimizer", sgd1}, {"optimizer", adam}}), dir, "diloco");
  const json dense = {{"H", 5},       {"chunk", 1024},   {"density", 1.0},   {"quantize", "none"},
                      {"decay", 0.0}, {"outer_lr", 1.0}, {"optimizer", adam}};
  const fs::path sparse = train_in(with_strategy(4, "sparseloco", dense), dir, "dense");
  CHECK(max_abs_diff(load_model_pt(diloco / "model.pt"), load_model_pt(sparse / "model.pt")) < 1e-5);
  json sparser = dense;
  sparser["density"] = 0.1;
  const fs::path top = train_in(with_strategy(4, "sparseloco", sparser), dir, "sparse");
  CHECK(max_abs_diff(load_model_pt(diloco / "model.pt"), load_model_pt(top / "model.pt")) > 1e-3);
}

TEST_CASE("sparseloco's bytes are the closed form: (K-1) * (offsets + packed values + scales) per sync",
          "[strategies][sparseloco][accounting]") {
  // small_manifest's MLP: tensors of 1024, 32, 128 and 4 values. 20 steps,
  // H = 5: 4 syncs of 4 nodes.
  TempDir dir("sparseloco-bytes");
  const int K = 4, syncs = 4;
  auto bytes_sent = [&](const json& options, const std::string& name) {
    const fs::path run = train_in(with_strategy(K, "sparseloco", options), dir, name);
    return json::parse(read_text(run / "summary.json")).at("communication").at("bytes_sent_per_node").get<double>();
  };
  // Chunks of 64 keep 4 (density 1/16): 16 * 4 + ceil(2) + 2 * 4 + ceil(0.25)
  // = 75 values, uint8 offsets. int2: 16 + 1 + 2 + 1 bytes of codes, 20
  // chunks, 20 scales.
  const double int2 = 75 + (16 + 1 + 2 + 1) + 20 * 4;
  const double fp32 = 75 + 75 * 4;
  const json fixed = {{"H", 5}, {"chunk", 64}, {"density", 0.0625}, {"offsets", "fixed"}};
  CHECK(bytes_sent(fixed, "int2") == syncs * (K - 1) * int2);
  json fixed_fp32 = fixed;
  fixed_fp32["quantize"] = "none";
  CHECK(bytes_sent(fixed_fp32, "fp32") == syncs * (K - 1) * fp32);
  // Elias-Fano offsets: a chunk of 64 keeping 4 takes 24 bits (l = 4), 32
  // values keeping 2 take 12 (l = 4), 4 values keeping 1 take 4 (l = 2):
  // 48 + 2 + 6 + 1 = 57 bytes instead of 75.
  const double elias_fano = 57 + (16 + 1 + 2 + 1) + 20 * 4;
  CHECK(bytes_sent({{"H", 5}, {"chunk", 64}, {"density", 0.0625}}, "elias-fano") == syncs * (K - 1) * elias_fano);
  // Chunks of 512 keep 32: again 64 + 2 + 8 + 1 = 75 values, with int16
  // offsets, 2 + 1 + 1 + 1 chunks.
  CHECK(bytes_sent({{"H", 5}, {"chunk", 512}, {"density", 0.0625}, {"offsets", "fixed"}}, "int16") ==
        syncs * (K - 1) * (75 * 2 + 20 + 5 * 4));
  const modules::ChunkTopKCompressor f({64, 0.0625, sdk::QuantFormat::Int2, modules::OffsetCoding::Fixed});
  CHECK(int2 == f.bytes(1024) + f.bytes(32) + f.bytes(128) + f.bytes(4));
  // DiLoCo's ring all-reduce of 1188 fp32 values sends 2 (K-1)/K * 4752
  // bytes per sync: 42x more than int2 here.
  const double diloco = 2.0 * (K - 1) / K * 4 * 1188;
  CHECK(diloco / ((K - 1) * int2) == Approx(7128.0 / 525.0));
}

TEST_CASE(
    "sparseloco refuses a density outside 0..1, an unknown format, a chunk larger than any tensor and a "
    "decay outside 0..1",
    "[strategies][sparseloco]") {
  auto plugin = exogym::test::test_loader().load("strategy", "sparseloco", "strategy.plugin");
  const json resolved = plugin->validate(json::object(), "strategy.options");
  CHECK(resolved["H"] == 15);
  CHECK(resolved["chunk"] == 4096);
  CHECK(resolved["density"] == 0.015625);
  CHECK(resolved["quantize"] == "int2");
  CHECK(resolved["decay"] == 0.95);
  CHECK(resolved["outer_lr"] == 1.0);
  for (const auto& spec : plugin->options()) {
    INFO(spec.name);
    CHECK_FALSE(spec.doc.empty());
  }
  auto create = [&](const json& given) { plugin->create_strategy(plugin->validate(given, "strategy.options")); };
  REQUIRE_THROWS_WITH(create({{"decay", 1.5}}), "decay: expected an error-buffer decay in [0, 1], got 1.5");
  REQUIRE_THROWS_WITH(create({{"decay", -0.1}}), "decay: expected an error-buffer decay in [0, 1], got -0.1");
  CHECK_NOTHROW(create({{"decay", 0}, {"quantize", "none"}}));
  REQUIRE_THROWS_WITH(plugin->validate({{"density", 0}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.density: expected"));
  REQUIRE_THROWS_WITH(plugin->validate({{"density", 1.5}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.density: expected"));
  REQUIRE_THROWS_WITH(plugin->validate({{"quantize", "int3"}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.quantize: expected one of"));

  TempDir dir("sparseloco-errors");
  auto run_error = [&](const json& given) -> std::string {
    try {
      run_json(with_strategy(2, "sparseloco", given), dir.path());
    } catch (const sdk::ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  // small_manifest's largest tensor holds 1024 values.
  CHECK_THAT(run_error({{"chunk", 4096}}),
             Catch::StartsWith("strategy.options.chunk: a chunk of 4096 values is larger than the model's largest "
                               "trainable tensor (1024 values): choose at most 1024"));
  CHECK_THAT(run_error({{"chunk", 64}, {"density", -1}}), Catch::Contains("strategy.options.density: expected"));
  CHECK_THAT(run_error({{"chunk", 64}, {"quantize", "int3"}}),
             Catch::Contains("strategy.options.quantize: expected one of"));
  CHECK_THAT(run_error({{"chunk", 64}, {"decay", 2}}), Catch::Contains("strategy.options.decay: expected"));
}
