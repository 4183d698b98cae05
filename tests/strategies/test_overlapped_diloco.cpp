// The strategy overlapped_diloco (plugins/modules/outer/overlapped_diloco.h):
// the eager and the delayed outer update against hand-computed values, the
// bytes of DiLoCo with each round's transfer hidden behind the next on the
// simulated clock, resuming with an average in flight, and bad input.
// (Every built-in strategy's exact resume, failures and processes:
// checkpoint_fixtures' builtin_strategies.)
#include <ATen/ATen.h>

#include "checkpoint_fixtures.h"
#include "exogym/modules/outer/overlapped_diloco.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "strategy_runs.h"
#include "tensor_model.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::read_text;
using exogym::test::TempDir;
using nlohmann::json;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;

using exogym::test::doubles;
using exogym::test::TensorModel;

namespace {

sdk::ModuleOptions overlapped_options(const std::string& update) {
  return sdk::ModuleOptions(json{{"H", 1}, {"update", update}, {"outer_optimizer", {{"name", "sgd"}, {"lr", 1.0}}}},
                            modules::OverlappedDiLoCoModule::specs());
}

// Node r's outer gradient in round t (t = 0, 1, 2): small integers, so that
// every value below is exact in binary.
at::Tensor own(int r, int t) { return doubles({1.0 + r + t, 2.0 * (r + 1) - t}); }

json overlapped_manifest(const std::string& plugin, const json& options) {
  json m = exogym::test::with_strategy(4, plugin, options);
  m["train"]["max_steps"] = 8;
  m["compute"] = {{"step_time", "100ms"}};
  return m;
}

json summary(const json& manifest, const TempDir& dir, const std::string& name) {
  return json::parse(read_text(exogym::test::train_in(manifest, dir, name) / "summary.json"));
}

}  // namespace

TEST_CASE("overlapped_diloco steps each node's master along the late average, eager or delayed, by hand",
          "[strategies][overlap]") {
  // K = 2, H = 1: every step ends a round. Outer SGD with lr 1: the master
  // moves by minus the outer gradient. Before each round's communication
  // node r holds master - own(r, t).
  const int K = 2, rounds = 3;
  for (const std::string update : {"eager", "delayed"}) {
    SECTION(update) {
      std::vector<std::vector<at::Tensor>> masters(K);
      exogym::test::run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
        sdk::NodeContext ctx;
        ctx.rank = rank;
        ctx.num_nodes = K;
        ctx.comm = &comm;
        ctx.max_steps = 100;
        TensorModel model({{"w", at::zeros({2}, at::kDouble)}});
        model.set(doubles({10, 20}));
        modules::OverlappedDiLoCoModule module(overlapped_options(update));
        module.init(ctx, model);
        for (int t = 0; t < rounds; ++t) {
          ctx.step = t;
          model.set(module.master()[0].detach() - own(rank, t));
          module.communicate(ctx, model, t);
          masters[rank].push_back(module.master()[0].detach().clone());
          LOCKED(CHECK(at::equal(model.value(), masters[rank].back())));  // every node continues from its master
        }
      });
      auto average = [](int t) { return (own(0, t) + own(1, t)) / 2; };
      for (int r = 0; r < K; ++r) {
        INFO("node " << r);
        at::Tensor master = doubles({10, 20});
        for (int t = 0; t < rounds; ++t) {
          INFO("round " << t);
          if (update == "delayed") {
            // The late average only: nothing in the first round.
            if (t > 0) master = master - average(t - 1);
          } else {
            // D_{t-1} + (d_t - d_{t-1}) / K, with D and d 0 before round 0.
            const at::Tensor late = t > 0 ? average(t - 1) : at::zeros({2}, at::kDouble);
            const at::Tensor previous = t > 0 ? own(r, t - 1) : at::zeros({2}, at::kDouble);
            master = master - (late + (own(r, t) - previous) / K);
          }
          CHECK(at::equal(masters[r][t], master));
        }
      }
      if (update == "eager") {
        // Round 0: own / 2, [1, 2] / 2 and [2, 4] / 2.
        CHECK(at::equal(masters[0][0], doubles({9.5, 19})));
        CHECK(at::equal(masters[1][0], doubles({9, 18})));
      } else {
        CHECK(at::equal(masters[0][0], doubles({10, 20})));
        CHECK(at::equal(masters[1][2], masters[0][2]));  // the same late average on every node
        CHECK(at::equal(masters[0][2], doubles({10, 20}) - average(0) - average(1)));
      }
    }
  }
}

TEST_CASE("overlapped_diloco sends DiLoCo's bytes and hides each round's transfer behind the next round",
          "[strategies][overlap][accounting]") {
  // 4 nodes, 8 steps of 100 ms, H = 4: syncs after steps 3 and 7. DiLoCo
  // waits for both transfers (T each); overlapped, the first is waited for
  // 4 steps later, when it has long landed, and only the last shows.
  TempDir dir("overlapped-diloco-clock");
  const json sgd = {{"name", "sgd"}, {"lr", 0.1}};
  for (const std::string update : {"eager", "delayed"}) {
    SECTION(update) {
      auto manifest = [&](const std::string& plugin, const std::string& bandwidth, const std::string& latency) {
        json options = {{"H", 4}, {"optimizer", sgd}};
        if (plugin == "overlapped_diloco") options["update"] = update;
        json m = overlapped_manifest(plugin, options);
        m["network"] = {{"bandwidth", bandwidth}, {"latency", latency}};
        return m;
      };
      const json d = summary(manifest("diloco", "100Mbit/s", "10ms"), dir, "diloco-" + update);
      const json o = summary(manifest("overlapped_diloco", "100Mbit/s", "10ms"), dir, "overlapped-" + update);
      for (const char* key :
           {"bytes_sent_per_node", "bytes_sent_total", "collectives_per_node", "peak_bytes_sent_per_step"}) {
        INFO(key);
        CHECK(o["communication"][key] == d["communication"][key]);
      }
      const double compute = o["simulated"]["compute_s"].get<double>();
      CHECK(compute == Approx(0.8));
      CHECK(d["simulated"]["compute_s"].get<double>() == compute);
      const double T = o["simulated"]["time_s"].get<double>() - compute;  // the last transfer
      CHECK(T > 0.05);
      CHECK(d["simulated"]["time_s"].get<double>() == Approx(compute + 2 * T).epsilon(1e-12));
      CHECK(o["simulated"]["hidden_s"].get<double>() == Approx(T).epsilon(1e-12));
      CHECK(d["simulated"]["hidden_s"].get<double>() == 0);
      // An infinitely fast network: the compute alone.
      const json instant = summary(manifest("overlapped_diloco", "1e30B/s", "0s"), dir, "instant-" + update);
      CHECK(instant["simulated"]["time_s"].get<double>() == instant["simulated"]["compute_s"].get<double>());
    }
  }
}

TEST_CASE("overlapped_diloco resumes bit for bit with an average in flight, and extends a finished run",
          "[strategies][overlap][checkpoint]") {
  // H = 3: syncs after steps 2, 5, 8, ...; the checkpoint after 7 steps
  // holds step 5's average in flight, to be used at step 8.
  for (const std::string update : {"eager", "delayed"}) {
    SECTION(update) {
      TempDir dir("overlapped-diloco-resume-" + update);
      json m = exogym::test::checkpointed_manifest(3, 7);
      m["checkpoint"]["keep"] = 5;
      m["strategy"] = {{"plugin", "overlapped_diloco"},
                       {"options", {{"H", 3}, {"update", update}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}}};
      m["train"]["max_steps"] = 16;
      exogym::test::train_into(m, dir / "whole");
      m["train"]["max_steps"] = 10;
      exogym::test::train_into(m, dir / "parts");
      exogym::test::resume_in(dir / "parts", {"train.max_steps=16"}, 7);
      exogym::test::require_same_run(dir / "whole", dir / "parts");
      std::map<std::string, at::Tensor> saved;
      for (auto& [name, tensor] :
           exogym::runtime::checkpoint::read_node_state(dir / "parts" / "checkpoints" / "step-7", 1, 7).file.tensors)
        saved[name] = tensor;
      CHECK(saved.at("strategy.module0.pending.work").numel() > 0);  // in flight on the clock
      CHECK(saved.count("strategy.module0.own.0") == (update == "eager" ? 1 : 0));
      CHECK(saved.at("strategy.module0.outer_step").item<int64_t>() == 5);

      // A run that ended after 7 steps, step 5's average in flight, and
      // is extended from its last checkpoint.
      m["train"]["max_steps"] = 7;
      exogym::test::train_into(m, dir / "finished");
      exogym::test::resume_in(dir / "finished", {"train.max_steps=16"});
      exogym::test::require_same_run(dir / "whole", dir / "finished");
    }
  }
}

TEST_CASE("overlapped_diloco: its options, and an unknown update at the option's path", "[strategies][overlap]") {
  auto plugin = exogym::test::test_loader().load("strategy", "overlapped_diloco", "strategy.plugin");
  const json resolved = plugin->validate(json::object(), "strategy.options");
  CHECK(resolved["H"] == 100);
  CHECK(resolved["update"] == "eager");
  CHECK(resolved["outer_optimizer"]["nesterov"] == true);
  for (const auto& spec : plugin->options()) {
    INFO(spec.name);
    CHECK_FALSE(spec.doc.empty());
  }
  REQUIRE_THROWS_WITH(plugin->validate({{"update", "lazy"}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.update: expected one of"));
}
