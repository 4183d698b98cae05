// The strategy streaming_diloco and its pieces (plugins/modules/outer/
// streaming_diloco.h, fragments.h): the cut into fragments, the staggered
// schedule with overlap and mixing against hand-computed values, the
// quantised outer gradient, the equivalence with diloco, the bytes of the
// peak step and of fp4 against closed forms, and every bad input.
// (Resuming in the middle of an overlap window: test_checkpoints.cpp.)
#include <ATen/ATen.h>

#include <map>

#include "checkpoint_fixtures.h"
#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/modules/outer/fragments.h"
#include "exogym/modules/outer/streaming_diloco.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/name_pattern.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/quantized_comm.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "strategy_runs.h"
#include "tensor_model.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::bit_identical;
using exogym::test::load_model_pt;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;

using exogym::test::doubles;
using exogym::test::TensorModel;

namespace {

sdk::NodeContext streaming_context(int rank, int K, sdk::Communicator& comm) {
  sdk::NodeContext ctx;
  ctx.rank = rank;
  ctx.num_nodes = K;
  ctx.comm = &comm;
  ctx.max_steps = 100;
  return ctx;
}

// Every option, as validation resolves them, as the module sees them.
sdk::ModuleOptions streaming_options(json given) {
  json o = {{"H", 4},
            {"fragments", 1},
            {"tau", 0},
            {"alpha", 0.0},
            {"quantize", "none"},
            {"collective", "reduce_scatter"},
            {"error_feedback", 0.0},
            {"outer_optimizer", {{"name", "sgd"}, {"lr", 1.0}}}};
  for (auto& [key, value] : given.items()) o[key] = value;
  return sdk::ModuleOptions(o, modules::StreamingDiLoCoModule::specs());
}

}  // namespace

// ---------------------------------------------------------------------------
// Fragments

TEST_CASE("fragments: P contiguous groups with the smallest largest group, or one per name pattern",
          "[strategies][streaming]") {
  using modules::Fragments;
  CHECK(modules::fragments_by_size({1024, 32, 1024, 32}, 2, "f") == Fragments{{0, 1}, {2, 3}});
  CHECK(modules::fragments_by_size({1024, 32, 1024, 32}, 4, "f") == Fragments{{0}, {1}, {2}, {3}});
  CHECK(modules::fragments_by_size({1024, 32, 1024, 32}, 1, "f") == Fragments{{0, 1, 2, 3}});
  // The largest group is as small as a contiguous cut allows (50), and every
  // group gets a tensor even where the cut would leave one empty.
  CHECK(modules::fragments_by_size({10, 10, 10, 10, 10}, 3, "f") == Fragments{{0, 1}, {2, 3}, {4}});
  CHECK(modules::fragments_by_size({50, 1, 1, 1}, 3, "f") == Fragments{{0}, {1, 2}, {3}});
  CHECK(modules::fragments_by_size({5, 1, 1, 1}, 4, "f") == Fragments{{0}, {1}, {2}, {3}});
  REQUIRE_THROWS_WITH(modules::fragments_by_size({3, 3}, 3, "strategy.options.fragments"),
                      "strategy.options.fragments: 3 fragments, but the model has 2 trainable parameter tensors: a "
                      "fragment holds at least one tensor");

  CHECK(sdk::glob_match("layers.0.*", "layers.0.weight"));
  CHECK(sdk::glob_match("*bias", "layers.2.bias"));
  CHECK(sdk::glob_match("*.0.*", "layers.0.bias"));
  CHECK(sdk::glob_match("*", ""));
  CHECK_FALSE(sdk::glob_match("layers.0.*", "layers.10.weight"));
  CHECK_FALSE(sdk::glob_match("*bias", "layers.2.bias_extra"));
  const std::vector<std::string> names = {"layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"};
  CHECK(modules::fragments_by_pattern(names, {"*bias", "*"}, "f") == Fragments{{1, 3}, {0, 2}});
  REQUIRE_THROWS_WITH(modules::fragments_by_pattern(names, {"layers.0.*"}, "strategy.options.fragments"),
                      Catch::StartsWith("strategy.options.fragments: the parameter \"layers.2.weight\" matches no "
                                        "pattern"));
  REQUIRE_THROWS_WITH(modules::fragments_by_pattern(names, {"*", "*bias"}, "strategy.options.fragments"),
                      Catch::StartsWith("strategy.options.fragments[1]: the pattern \"*bias\" gets no parameter") &&
                          Catch::Contains("layers.2.bias"));
}

// ---------------------------------------------------------------------------
// The schedule, overlap and mixing

TEST_CASE("fragments: strided by numbered layer, as the paper prefers, the rest with the layer before them",
          "[strategies][streaming]") {
  using modules::Fragments;
  CHECK(modules::layer_index("transformer.h.3.attn.c_attn.weight") == 3);
  CHECK(modules::layer_index("layers.12.bias") == 12);
  CHECK(modules::layer_index("transformer.wte.weight") == -1);
  CHECK(modules::layer_index("h3.weight") == -1);
  // nanoGPT's order: embeddings, the blocks, the final norm.
  const std::vector<std::string> gpt = {"transformer.wte.weight",      "transformer.wpe.weight",
                                        "transformer.h.0.ln_1.weight", "transformer.h.0.attn.c_attn.weight",
                                        "transformer.h.1.ln_1.weight", "transformer.h.1.attn.c_attn.weight",
                                        "transformer.h.2.ln_1.weight", "transformer.h.2.attn.c_attn.weight",
                                        "transformer.h.3.ln_1.weight", "transformer.h.3.attn.c_attn.weight",
                                        "transformer.ln_f.weight"};
  // Layers 0 and 2 (with the embeddings before them), layers 1 and 3 (with
  // the final norm after layer 3).
  CHECK(modules::fragments_by_layer_stride(gpt, 2, "f") == Fragments{{0, 1, 2, 3, 6, 7}, {4, 5, 8, 9, 10}});
  CHECK(modules::fragments_by_layer_stride(gpt, 4, "f") == Fragments{{0, 1, 2, 3}, {4, 5}, {6, 7}, {8, 9, 10}});
  // Contiguous groups of the same model keep neighbouring layers together.
  CHECK(modules::make_fragments(json{{"count", 2}, {"pattern", "contiguous"}}, gpt, std::vector<int64_t>(11, 1), "f") ==
        modules::fragments_by_size(std::vector<int64_t>(11, 1), 2, "f"));
  CHECK(modules::make_fragments(json{{"count", 2}, {"pattern", "strided"}}, gpt, std::vector<int64_t>(11, 1), "f") ==
        modules::fragments_by_layer_stride(gpt, 2, "f"));
  // Layer numbers need not start at 0 or be consecutive: their order counts.
  CHECK(modules::fragments_by_layer_stride({"layers.0.w", "layers.2.w", "layers.4.w"}, 2, "f") ==
        Fragments{{0, 2}, {1}});
  REQUIRE_THROWS_WITH(modules::fragments_by_layer_stride(gpt, 5, "strategy.options.fragments"),
                      Catch::StartsWith("strategy.options.fragments: 5 strided fragments, but the parameter names show "
                                        "4 numbered layers"));
  REQUIRE_THROWS_WITH(modules::fragments_by_layer_stride({"wte.weight", "ln_f.weight"}, 1, "f"),
                      Catch::StartsWith("f: 1 strided fragments, but the parameter names show 0 numbered layers"));
}

TEST_CASE("streaming_diloco with strided fragments syncs each fragment's layers together, as the same cut by patterns",
          "[strategies][streaming]") {
  TempDir dir("streaming-strided");
  const json adam = {{"name", "adam"}, {"lr", 1e-2}};
  // small_manifest's MLP: layers.0.{weight,bias}, layers.1.{weight,bias}.
  json strided = {{"H", 4}, {"fragments", {{"count", 2}, {"pattern", "strided"}}}, {"optimizer", adam}};
  json patterns = strided;
  patterns["fragments"] = {"layers.0.*", "*"};
  const fs::path a = train_in(with_strategy(4, "streaming_diloco", strided), dir, "strided");
  const fs::path b = train_in(with_strategy(4, "streaming_diloco", patterns), dir, "patterns");
  CHECK(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(b / "model.pt")));
  CHECK(read_text(a / "comm.csv") == read_text(b / "comm.csv"));
}

TEST_CASE("streaming_diloco: fragment p sends after steps o_p + kH - 1 and mixes the result tau steps later",
          "[strategies][streaming]") {
  // K = 2, H = 4, P = 2: "a" is fragment 0 (offset 0: sends after step 3),
  // "b" fragment 1 (offset 2: sends after step 1, then 5). tau = 1, alpha =
  // 0.5, outer SGD with lr 1 and no momentum, whose step lands on the
  // average: master - (master - average). All values are exact in binary.
  // Node r holds a = (r+1) [1, 2] + t, b = (r+1) [10, 20] + t before step t's
  // communication.
  const int K = 2;
  std::vector<std::vector<at::Tensor>> a(K), b(K);
  std::vector<at::Tensor> master_b(K);
  exogym::test::run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    auto ctx = streaming_context(rank, K, comm);
    TensorModel model({{"a", at::zeros({2}, at::kDouble)}, {"b", at::zeros({2}, at::kDouble)}});
    modules::StreamingDiLoCoModule module(streaming_options({{"fragments", 2}, {"tau", 1}, {"alpha", 0.5}}));
    module.init(ctx, model);
    LOCKED(CHECK(module.fragments() == modules::Fragments{{0}, {1}}));
    LOCKED(CHECK(module.first_send(0) == 3));
    LOCKED(CHECK(module.first_send(1) == 1));
    for (int64_t t = 0; t <= 4; ++t) {
      ctx.step = t;
      model.set({doubles({1, 2}) * (rank + 1) + t, doubles({10, 20}) * (rank + 1) + t});
      module.communicate(ctx, model, t);
      a[rank].push_back(model.value(0));
      b[rank].push_back(model.value(1));
    }
  });
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    for (int64_t t : {0, 1, 3})
      CHECK(at::equal(b[r][t], doubles({10, 20}) * (r + 1) + t));  // sent at 1, not yet applied
    for (int64_t t : {0, 1, 2, 3}) CHECK(at::equal(a[r][t], doubles({1, 2}) * (r + 1) + t));
    // Step 1's average of b: [16, 31]; at step 2, half of it and half local.
    CHECK(at::equal(b[r][2], (doubles({10, 20}) * (r + 1) + 2) * 0.5 + doubles({16, 31}) * 0.5));
    // Step 3's average of a: [4.5, 6]; mixed in at step 4.
    CHECK(at::equal(a[r][4], (doubles({1, 2}) * (r + 1) + 4) * 0.5 + doubles({4.5, 6}) * 0.5));
  }
  CHECK(at::equal(b[0][2], doubles({14, 26.5})));
  CHECK(at::equal(a[1][4], doubles({5.25, 7})));
}

TEST_CASE("streaming_diloco with a low-bit format steps the master by the quantised mean of master - local",
          "[strategies][streaming]") {
  const int K = 2;
  std::vector<at::Tensor> after(K), expected(K);
  exogym::test::run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    auto ctx = streaming_context(rank, K, comm);
    TensorModel model({{"a", at::zeros({2}, at::kDouble)}, {"b", at::zeros({2}, at::kDouble)}});
    model.set({doubles({1, 2}), doubles({3, 4})});  // the master
    modules::StreamingDiLoCoModule module(streaming_options({{"quantize", "fp8"}, {"H", 2}}));
    module.init(ctx, model);
    const at::Tensor a = doubles({1.3, 0.7}) * (rank + 1), b = doubles({2.9, 4.4}) - rank;
    model.set({a, b});
    module.communicate(ctx, model, 0);  // not a sync step
    LOCKED(CHECK(at::equal(model.value(0), a)));
    module.communicate(ctx, model, 1);
    after[rank] = at::cat({model.value(0), model.value(1)});
    // The same exchange by hand: outer lr 1 steps by the whole mean.
    const auto mean = sdk::quantized_mean_async(comm, {sdk::quantize(doubles({1, 2}) - a, sdk::QuantFormat::Fp8E4M3),
                                                       sdk::quantize(doubles({3, 4}) - b, sdk::QuantFormat::Fp8E4M3)})
                          .wait();
    expected[rank] = at::cat({doubles({1, 2}) - mean[0], doubles({3, 4}) - mean[1]});
  });
  CHECK(at::equal(after[0], expected[0]));
  CHECK(at::equal(after[1], after[0]));
  // fp8 rounds: not the exact average of the parameters.
  const at::Tensor exact = at::cat({doubles({1.3, 0.7}) * 1.5, doubles({2.4, 3.9})});
  CHECK_FALSE(at::equal(after[0], exact));
  CHECK((after[0] - exact).abs().max().item<double>() < 0.1);
}

TEST_CASE("streaming_diloco with error feedback sends master - local plus what the last payload lost",
          "[strategies][streaming][quantize]") {
  // H = 1: a sync every step. Node r's outer gradient is g_t = master -
  // local; with decay 1 it sends q(g_t + e_{t-1}) and keeps e_t = g_t +
  // e_{t-1} - q(...): an ErrorFeedback around the same quantiser, fed the
  // same outer gradients by hand, gives the same mean, bit for bit.
  const int K = 2;
  std::vector<at::Tensor> after(K), expected(K), residual(K);
  exogym::test::run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    auto ctx = streaming_context(rank, K, comm);
    TensorModel model({{"a", at::zeros({2}, at::kDouble)}, {"b", at::zeros({2}, at::kDouble)}});
    model.set({doubles({1, 2}), doubles({3, 4})});
    modules::StreamingDiLoCoModule module(streaming_options({{"quantize", "int4"}, {"H", 1}, {"error_feedback", 1.0}}));
    module.init(ctx, model);
    modules::ErrorFeedback by_hand(1.0f);
    const modules::QuantizeCompressor int4(sdk::QuantFormat::Int4);
    at::Tensor master_a = doubles({1, 2}), master_b = doubles({3, 4});
    for (int64_t t = 0; t < 3; ++t) {
      ctx.step = t;
      const at::Tensor a = master_a + doubles({0.13, -0.71}) * (rank + 1) * (t + 1);
      const at::Tensor b = master_b + doubles({0.29, 0.05}) * (rank - 1) * (t + 2);
      model.set({a, b});
      module.communicate(ctx, model, t);
      // The same exchange by hand (outer SGD with lr 1 steps by the mean).
      const auto mean = modules::compressed_mean(
          comm, int4, {{by_hand.compress(0, int4, master_a - a), {2}}, {by_hand.compress(1, int4, master_b - b), {2}}});
      master_a = master_a - mean[0].to(at::kDouble);
      master_b = master_b - mean[1].to(at::kDouble);
    }
    after[rank] = at::cat({model.value(0), model.value(1)});
    expected[rank] = at::cat({master_a, master_b});
    residual[rank] = by_hand.residual(0);
    sdk::StateDict state;
    module.save_state(state, "");
    LOCKED(CHECK(at::equal(state.at("fragment.0.residual.0"), by_hand.residual(0))));
    LOCKED(CHECK(at::equal(state.at("fragment.0.residual.1"), by_hand.residual(1))));
  });
  for (int r = 0; r < K; ++r) CHECK(at::equal(after[r], expected[r]));
  CHECK(residual[0].abs().max().item<double>() > 0);  // int4 lost something, kept for the next sync
}

// ---------------------------------------------------------------------------
// Whole runs: DiLoCo's limit and the bytes

TEST_CASE("streaming_diloco with one fragment, tau 0, alpha 0 and no quantisation is diloco, bit for bit",
          "[strategies][streaming]") {
  TempDir dir("streaming-diloco");
  const json adam = {{"name", "adam"}, {"lr", 1e-2}};
  const fs::path diloco = train_in(with_strategy(4, "diloco", {{"H", 5}, {"optimizer", adam}}), dir, "diloco");
  const json one = {{"H", 5}, {"fragments", 1}, {"tau", 0}, {"alpha", 0}, {"quantize", "none"}, {"optimizer", adam}};
  const fs::path streaming = train_in(with_strategy(4, "streaming_diloco", one), dir, "streaming");
  CHECK(bit_identical(load_model_pt(diloco / "model.pt"), load_model_pt(streaming / "model.pt")));
  CHECK(read_text(diloco / "comm.csv") == read_text(streaming / "comm.csv"));
  // Two fragments sync on other steps: another model.
  json two = one;
  two["fragments"] = 2;
  const fs::path split = train_in(with_strategy(4, "streaming_diloco", two), dir, "split");
  CHECK_FALSE(bit_identical(load_model_pt(diloco / "model.pt"), load_model_pt(split / "model.pt")));
}

namespace {

// A 32 -> 32 -> 32 MLP: tensors of 1024, 32, 1024 and 32 values, so two
// fragments of 1056 each.
json even_manifest(const std::string& plugin, json options) {
  json m = with_strategy(4, plugin, std::move(options));
  m["model"]["options"]["num_classes"] = 32;
  for (const char* split : {"train", "val"}) m["data"][split]["options"]["classes"] = 32;
  m["train"]["max_steps"] = 16;
  return m;
}

struct Bytes {
  double total, peak, mean;
};

Bytes run_bytes(const fs::path& run) {
  const json comm = json::parse(read_text(run / "summary.json")).at("communication");
  double peak = 0;
  for (const auto& node : comm.at("per_node")) peak = std::max(peak, node.at("peak_step_bytes_sent").get<double>());
  CHECK(comm.at("peak_bytes_sent_per_step").get<double>() == peak);
  return {comm.at("bytes_sent_per_node").get<double>(), peak, comm.at("mean_bytes_sent_per_step").get<double>()};
}

}  // namespace

TEST_CASE("streaming_diloco's peak step sends one fragment: DiLoCo's bytes per sync / P, the same total",
          "[strategies][streaming][accounting]") {
  TempDir dir("streaming-bytes");
  const int K = 4, steps = 16, H = 4;
  const double params = 2 * (32 * 32 + 32);
  auto ring = [&](double values) { return 2.0 * (K - 1) / K * 4 * values; };  // an fp32 all-reduce, per node
  const Bytes diloco = run_bytes(train_in(even_manifest("diloco", {{"H", H}}), dir, "diloco"));
  CHECK(diloco.peak == ring(params));
  CHECK(diloco.total == steps / H * ring(params));
  CHECK(diloco.mean == diloco.total / steps);
  // Two fragments of 1056 values: half of DiLoCo's peak. Four fragments are
  // the four tensors: the peak is the largest, 1024 values.
  for (const auto& [P, largest] : {std::pair<int, double>{2, params / 2}, {4, 1024.0}}) {
    INFO(P << " fragments");
    const Bytes streaming =
        run_bytes(train_in(even_manifest("streaming_diloco", {{"H", H}, {"fragments", P}}), dir, std::to_string(P)));
    CHECK(streaming.peak == ring(largest));
    CHECK(streaming.total == diloco.total);
    CHECK(streaming.mean == diloco.mean);
  }
  CHECK(ring(params / 2) == diloco.peak / 2);
  // fp4 payloads: ceil(n/2) + 4 ceil(n/128) bytes per tensor of n values.
  // Per fragment (1024 + 32 values): 512 + 4*8 and 16 + 4*1 bytes.
  const double fragment = (512 + 4 * 8) + (16 + 4 * 1);
  CHECK(fragment ==
        sdk::quantized_bytes(sdk::QuantFormat::Fp4E2M1, 1024) + sdk::quantized_bytes(sdk::QuantFormat::Fp4E2M1, 32));
  // Gathered: the payload (K-1) times per node.
  const Bytes gathered = run_bytes(train_in(
      even_manifest("streaming_diloco", {{"H", H}, {"fragments", 2}, {"quantize", "fp4"}, {"collective", "gather"}}),
      dir, "fp4-gather"));
  CHECK(gathered.peak == (K - 1) * fragment);
  CHECK(gathered.total == 2 * steps / H * (K - 1) * fragment);
  // About 7.5x below fp32 on the wire per value; against the ring all-reduce
  // of 4 nodes, (K-1) * 564 / (1.5 * 4 * 1056).
  CHECK(diloco.peak / 2 / gathered.peak == Approx(6336.0 / 1692.0));
  // Reduce-scattered (the default): the 1024 values in chunks of 256
  // (136 bytes each), the 32 in node 0's chunk alone (20 bytes). Node p
  // sends every chunk but its own, then every mean chunk but its
  // successor's: 408 + 428 bytes for nodes 0 and 3, 428 + 428 for 1 and 2,
  // a ring all-reduce's 2 (K-1)/K times the payload on average.
  const Bytes fp4 = run_bytes(
      train_in(even_manifest("streaming_diloco", {{"H", H}, {"fragments", 2}, {"quantize", "fp4"}}), dir, "fp4"));
  CHECK(fp4.peak == 856);
  CHECK(fp4.total == 2 * steps / H * 2.0 * (K - 1) / K * fragment);
  CHECK(diloco.peak / 2 / fp4.peak == Approx(6336.0 / 856.0));
}

TEST_CASE("streaming_diloco's overlap hides each sync behind tau inner steps on the simulated clock",
          "[strategies][streaming][overlap]") {
  // 4 nodes, 8 steps of 100 ms, H = 4. DiLoCo syncs the whole MLP after
  // steps 3 and 7; P = 2 syncs fragment 1 after steps 1 and 5, fragment 0
  // after 3 and 7. With tau = 2 each sync lands 2 steps (200 ms) after it
  // was sent, far more than its transfer takes at 100 Mbit/s, except the
  // one sent at the last step, which the run waits for.
  TempDir dir("streaming-overlap");
  auto manifest = [](const std::string& plugin, json options, const std::string& bandwidth,
                     const std::string& latency) {
    json m = with_strategy(4, plugin, options);
    m["train"]["max_steps"] = 8;
    m["compute"] = {{"step_time", "100ms"}};
    m["network"] = {{"bandwidth", bandwidth}, {"latency", latency}};
    return m;
  };
  const json sgd = {{"name", "sgd"}, {"lr", 0.1}};
  const json diloco = {{"H", 4}, {"optimizer", sgd}};
  const json blocking = {{"H", 4}, {"fragments", 2}, {"optimizer", sgd}};
  json overlapped = blocking, overlapped_fp4 = blocking;
  overlapped["tau"] = 2;
  overlapped_fp4["tau"] = 2;
  overlapped_fp4["quantize"] = "fp4";
  json fp4 = blocking;
  fp4["quantize"] = "fp4";
  auto simulated = [&](const std::string& name, const std::string& plugin, const json& options,
                       const std::string& bandwidth, const std::string& latency) {
    const fs::path run = train_in(manifest(plugin, options, bandwidth, latency), dir, name);
    return json::parse(read_text(run / "summary.json"));
  };

  SECTION("at 100 Mbit/s: below DiLoCo's time and the blocking schedule's, by exactly the time hidden") {
    const json d = simulated("diloco", "diloco", diloco, "100Mbit/s", "10ms");
    const json b = simulated("blocking", "streaming_diloco", blocking, "100Mbit/s", "10ms");
    const json o = simulated("overlapped", "streaming_diloco", overlapped, "100Mbit/s", "10ms");
    const json q = simulated("fp4", "streaming_diloco", fp4, "100Mbit/s", "10ms");
    const json oq = simulated("overlapped-fp4", "streaming_diloco", overlapped_fp4, "100Mbit/s", "10ms");
    auto time = [](const json& s) { return s["simulated"]["time_s"].get<double>(); };
    auto hidden = [](const json& s) { return s["simulated"]["hidden_s"].get<double>(); };
    for (const json* s : {&d, &b, &o, &q, &oq}) CHECK((*s)["simulated"]["compute_s"].get<double>() == Approx(0.8));
    // The same bytes, blocking or not.
    for (const char* key : {"bytes_sent_per_node", "bytes_sent_total", "collectives_per_node",
                            "peak_bytes_sent_per_step", "mean_bytes_sent_per_step"}) {
      INFO(key);
      CHECK(o["communication"][key] == b["communication"][key]);
      CHECK(oq["communication"][key] == q["communication"][key]);
    }
    CHECK(hidden(b) == 0);
    CHECK(hidden(q) == 0);
    CHECK(hidden(o) > 0);
    CHECK(time(o) < time(b));
    CHECK(time(o) < time(d));
    CHECK(time(oq) < time(q));
    CHECK(time(oq) < time(d));
    // Three of the four syncs are hidden whole; only the last one shows.
    CHECK(time(b) == Approx(time(o) + hidden(o)).epsilon(1e-12));
    CHECK(time(q) == Approx(time(oq) + hidden(oq)).epsilon(1e-12));
    CHECK(time(o) - 0.8 == Approx((time(b) - 0.8) / 4).epsilon(0.2));
  }
  SECTION("on an infinitely fast network: the compute alone, overlapped or not") {
    for (const auto& [name, plugin, options] : std::vector<std::tuple<std::string, std::string, json>>{
             {"diloco-instant", "diloco", diloco},
             {"blocking-instant", "streaming_diloco", blocking},
             {"overlapped-instant", "streaming_diloco", overlapped}}) {
      INFO(name);
      const json s = simulated(name, plugin, options, "1e30B/s", "0s");
      CHECK(s["simulated"]["compute_s"].get<double>() == Approx(0.8));
      CHECK(s["simulated"]["time_s"].get<double>() == s["simulated"]["compute_s"].get<double>());
    }
  }
}

TEST_CASE("streaming_diloco: a node back inside an overlap window receives what is in flight and applies it",
          "[strategies][streaming][faults]") {
  TempDir dir("streaming-rejoin");
  json m = exogym::test::checkpointed_manifest(4, 8);
  m["train"]["max_steps"] = 8;
  // H = 4, P = 2 (the MLP's tensors: 0 | 1, 2, 3), tau = 2: fragment 1 sends
  // after steps 1 and 5 and applies after steps 3 and 7. Node 2 is down for
  // steps 3 to 5 and back for step 6, while step 5's sync is in flight.
  m["strategy"] = {
      {"plugin", "streaming_diloco"},
      {"options",
       {{"H", 4}, {"fragments", 2}, {"tau", 2}, {"alpha", 0}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}}};
  m["faults"] = json::parse(R"([{"node": 2, "fail_at": 3, "rejoin_at": 6}])");
  run_json(m, dir.path());
  const std::string at = "strategy.module0.fragment.1.";
  for (int rank = 0; rank < 4; ++rank) {
    INFO("node " << rank);
    std::map<std::string, at::Tensor> t;
    for (auto& [name, tensor] :
         exogym::runtime::checkpoint::read_node_state(dir / "run" / "checkpoints" / "step-8", rank, 8).file.tensors)
      t[name] = tensor;
    // Alpha 0: after step 7 every node's fragment 1 is its new global copy,
    // the returning node's too (it applied the sync it never sent).
    CHECK(t.at(at + "outer_step").item<int64_t>() == 7);
    CHECK(t.count(at + "pending_step") == 0);
    CHECK(at::equal(t.at("model.layers.0.bias"), t.at(at + "master.0")));
    CHECK(at::equal(t.at("model.layers.1.weight"), t.at(at + "master.1")));
    CHECK(at::equal(t.at("model.layers.1.bias"), t.at(at + "master.2")));
    // Fragment 0 synced after step 3 and took 4 inner steps since.
    CHECK_FALSE(at::equal(t.at("model.layers.0.weight"), t.at("strategy.module0.fragment.0.master.0")));
  }
}

TEST_CASE(
    "streaming_diloco's low-bit reduce-scatter with a node down: chunks by place among the live nodes, all_to_all "
    "rows in comm.csv, the cluster's bytes 2 (K-1) times the payload",
    "[strategies][streaming][faults][quantize]") {
  TempDir dir("streaming-rs-faults");
  // The 32 -> 32 -> 32 MLP, H = 2, one fragment: a sync after steps 1, 3,
  // 5, 7. Node 1 is down for steps 2 to 5, so the syncs after steps 3 and 5
  // run on 3 nodes, where node 2 has place 1 and node 3 place 2.
  json m = even_manifest("streaming_diloco", {{"H", 2}, {"fragments", 1}, {"quantize", "fp4"}});
  m["train"]["max_steps"] = 8;
  m["faults"] = json::parse(R"([{"node": 1, "fail_at": 2, "rejoin_at": 6}])");
  const fs::path run = train_in(m, dir, "run");
  // The payload: 2 * (544 + 20) bytes in fp4 blocks of 128.
  const double S = 2 * ((512 + 4 * 8) + (16 + 4 * 1));
  double all_to_all = 0, all_gather = 0;
  std::map<int64_t, double> by_step;
  for (const auto& row : read_csv(run / "comm.csv")) {
    if (row.at("source") != "strategy") continue;
    const double bytes = std::stod(row.at("bytes_sent"));
    if (row.at("collective") == "all_to_all") all_to_all += bytes;
    if (row.at("collective") == "all_gather") all_gather += bytes;
    by_step[std::stoll(row.at("step"))] += bytes;
  }
  // Each half sends (K-1) S over the cluster: K = 4, 3, 3, 4.
  CHECK(all_to_all == (3 + 2 + 2 + 3) * S);
  CHECK(all_gather == (3 + 2 + 2 + 3) * S);
  CHECK(by_step.at(4) == 2 * 2 * S);
  CHECK(by_step.at(8) == 2 * 3 * S);
}

// ---------------------------------------------------------------------------
// Options and bad input

TEST_CASE("streaming_diloco refuses tau >= H, alpha outside 0..1, an unknown format and too many fragments",
          "[strategies][streaming]") {
  auto plugin = exogym::test::test_loader().load("strategy", "streaming_diloco", "strategy.plugin");
  const json resolved = plugin->validate(json::object(), "strategy.options");
  CHECK(resolved["H"] == 100);
  CHECK(resolved["fragments"] == 4);
  CHECK(resolved["tau"] == 0);
  CHECK(resolved["alpha"] == 0.0);
  CHECK(resolved["quantize"] == "none");
  CHECK(resolved["error_feedback"] == 0.0);
  CHECK(resolved["outer_optimizer"]["nesterov"] == true);
  for (const auto& spec : plugin->options()) {
    INFO(spec.name);
    CHECK_FALSE(spec.doc.empty());
  }
  auto create = [&](const json& given) { plugin->create_strategy(plugin->validate(given, "strategy.options")); };
  REQUIRE_THROWS_WITH(create({{"H", 4}, {"tau", 4}}),
                      Catch::StartsWith("tau: expected an overlap below H = 4 inner steps, got 4"));
  CHECK_NOTHROW(create({{"H", 4}, {"tau", 3}}));
  REQUIRE_THROWS_WITH(create({{"alpha", 1.5}}), "alpha: expected a mixing factor in [0, 1], got 1.5");
  REQUIRE_THROWS_WITH(create({{"alpha", -0.1}}), "alpha: expected a mixing factor in [0, 1], got -0.1");
  REQUIRE_THROWS_WITH(plugin->validate({{"quantize", "fp3"}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.quantize: expected one of"));
  REQUIRE_THROWS_WITH(create({{"error_feedback", 1}}),
                      Catch::StartsWith("error_feedback: error feedback keeps what quantising loses, but \"quantize\" "
                                        "is \"none\""));
  REQUIRE_THROWS_WITH(create({{"quantize", "fp4"}, {"error_feedback", 1.5}}),
                      "error_feedback: expected 0 (off) or a decay in (0, 1], got 1.5");
  CHECK_NOTHROW(create({{"quantize", "fp4"}, {"error_feedback", 1}}));
  REQUIRE_THROWS_WITH(create({{"fragments", 0}}), Catch::StartsWith("fragments: expected a positive integer"));
  REQUIRE_THROWS_WITH(create({{"fragments", json::array()}}), Catch::StartsWith("fragments: expected a positive"));
  REQUIRE_THROWS_WITH(create({{"fragments", {"*", 3}}}),
                      "fragments[1]: expected a parameter name pattern (a non-empty string), got 3");
  REQUIRE_THROWS_WITH(create({{"fragments", {{"count", 0}}}}),
                      Catch::StartsWith("fragments.count: expected a positive integer"));
  REQUIRE_THROWS_WITH(create({{"fragments", {{"pattern", "strided"}}}}),
                      "fragments.count: expected a positive integer (the number of fragments), got nothing");
  REQUIRE_THROWS_WITH(create({{"fragments", {{"count", 2}, {"pattern", "interleaved"}}}}),
                      "fragments.pattern: expected \"contiguous\" or \"strided\", got \"interleaved\"");
  REQUIRE_THROWS_WITH(create({{"fragments", {{"count", 2}, {"stride", 2}}}}),
                      Catch::StartsWith("fragments.stride: unknown key"));

  // In a run: the errors are at the option's JSON path, exit status 2's kind.
  TempDir dir("streaming-errors");
  auto run_error = [&](const json& given) -> std::string {
    try {
      run_json(with_strategy(2, "streaming_diloco", given), dir.path());
    } catch (const sdk::ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  // small_manifest's MLP has 4 parameter tensors.
  CHECK_THAT(
      run_error({{"fragments", 5}}),
      Catch::Contains("strategy.options.fragments: 5 fragments, but the model has 4 trainable parameter tensors"));
  CHECK_THAT(run_error({{"H", 10}, {"tau", 12}}), Catch::Contains("strategy.options.tau: expected an overlap below H"));
  CHECK_THAT(run_error({{"alpha", 2}}), Catch::Contains("strategy.options.alpha: expected a mixing factor"));
  CHECK_THAT(run_error({{"quantize", "int3"}}), Catch::Contains("strategy.options.quantize: expected one of"));
  CHECK_THAT(run_error({{"fragments", {{"count", 3}, {"pattern", "strided"}}}}),
             Catch::Contains("strategy.options.fragments: 3 strided fragments, but the parameter names show 2 "
                             "numbered layers"));
  CHECK_THAT(run_error({{"fragments", {"layers.0.*"}}}),
             Catch::Contains("strategy.options.fragments: the parameter \"layers.1.weight\" matches no pattern"));
}
