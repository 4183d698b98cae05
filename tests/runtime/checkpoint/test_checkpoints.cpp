// Checkpoints in one process: the optimizer state, the folder layout, and
// resuming every built-in strategy and model exactly (docs/checkpoints.md).
#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fstream>
#include <thread>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/checkpoint/stop_point.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/plugin.h"
#include "helpers.h"
#include "lm_fixtures.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Steps `optimizer` on `param` with the gradient of sum(param^2) n times.
void take_steps(torch::optim::Optimizer& optimizer, at::Tensor& param, int n) {
  for (int i = 0; i < n; ++i) {
    optimizer.zero_grad();
    param.mutable_grad() = param.detach() * 2;
    optimizer.step();
  }
}

// Trains `manifest` for `total` steps in one go into dir/whole; then for
// `stop` steps into dir/parts and resumes it up to `total`; the two runs
// must be the same. Returns the resumed run's folder.
fs::path require_exact_resume(json manifest, const TempDir& dir, int64_t stop, int64_t total) {
  manifest["train"]["max_steps"] = total;
  train_into(manifest, dir / "whole");
  manifest["train"]["max_steps"] = stop;
  train_into(manifest, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=" + std::to_string(total)});
  require_same_run(dir / "whole", dir / "parts");
  return dir / "parts";
}

}  // namespace

TEST_CASE("optimizer state survives save and load: adam and adamw steps, sgd momentum, rmsprop", "[checkpoint]") {
  for (const char* name : {"adam", "adamw", "sgd", "rmsprop", "adagrad"}) {
    INFO(name);
    sdk::OptimizerSpec spec = sdk::OptimizerSpec::from_json(json{{"name", name}, {"lr", 0.01}}, "optimizer");
    if (std::string(name) == "sgd") spec.params["momentum"] = 0.9;
    at::Tensor a = at::arange(6, at::kFloat).reshape({2, 3}).set_requires_grad(true);
    at::Tensor b = a.detach().clone().set_requires_grad(true);
    auto first = spec.build({a});
    take_steps(*first, a, 3);

    // b takes the same 3 steps, is saved, and continues in a new optimizer.
    auto before = spec.build({b});
    take_steps(*before, b, 3);
    sdk::StateDict saved;
    sdk::save_optimizer_state(*before, {b}, saved, "opt.");
    if (std::string(name) != "sgd") CHECK(saved.at("opt.0.step").item<int64_t>() == 3);
    if (std::string(name) == "sgd") CHECK(saved.count("opt.0.momentum_buffer") == 1);
    auto after = spec.build({b});
    sdk::load_optimizer_state(*after, {b}, saved, "opt.");

    take_steps(*first, a, 4);
    take_steps(*after, b, 4);
    CHECK(at::equal(a, b));
  }
}

TEST_CASE("Ctrl-C stops every node at a boundary none has passed yet", "[checkpoint]") {
  using Answer = runtime::checkpoint::StopPoint::Answer;
  // Node 0 reached boundary 5 before the request and went on into step 5's
  // collectives; node 1 sees the request at boundary 5. Stopping node 1 there
  // would leave node 0 waiting in a collective node 1 never enters.
  runtime::checkpoint::StopPoint drift(0, 2, 0);
  CHECK(drift.at_boundary(0, 5, false) == Answer::Go);
  CHECK(drift.at_boundary(1, 5, true) == Answer::Go);
  CHECK(drift.at_boundary(1, 6, false) == Answer::Stop);
  CHECK(drift.at_boundary(0, 6, false) == Answer::Stop);

  // The requesting node is ahead (DiLoCo lets nodes drift by up to H steps):
  // the others catch up to its boundary and stop there.
  runtime::checkpoint::StopPoint ahead(0, 3, 10);
  CHECK(ahead.at_boundary(1, 11, false) == Answer::Go);
  CHECK(ahead.at_boundary(0, 14, true) == Answer::Stop);
  CHECK(ahead.at_boundary(1, 12, false) == Answer::Go);
  CHECK(ahead.at_boundary(1, 14, false) == Answer::Stop);
  CHECK(ahead.at_boundary(2, 14, true) == Answer::Stop);

  // Nodes numbered from the block's first rank (a process's share of nodes).
  runtime::checkpoint::StopPoint block(4, 2, 0);
  CHECK(block.at_boundary(5, 3, false) == Answer::Go);
  CHECK(block.at_boundary(4, 2, true) == Answer::Go);
  CHECK(block.at_boundary(4, 4, false) == Answer::Stop);
  CHECK(block.at_boundary(5, 4, false) == Answer::Stop);
}

TEST_CASE("over several processes, nodes stop at the largest proposal, which none has passed", "[checkpoint]") {
  using runtime::checkpoint::StopPoint;
  using Answer = StopPoint::Answer;
  // This process hosts nodes 2 and 3. Node 3 is blocked inside step 7's
  // collective (it reached boundary 7), waiting for another process; node 2
  // is at step 5. Nobody stops before a proposal.
  StopPoint point(2, 2, 0, true);
  CHECK(point.at_boundary(2, 5, true) == Answer::Go);
  CHECK(point.at_boundary(3, 7, true) == Answer::Go);
  // Proposed from a thread of its own: one beyond the furthest boundary, so
  // node 3 need not reach a boundary for it; proposing again changes nothing.
  CHECK(point.propose() == 8);
  CHECK(point.at_boundary(2, 6, false) == Answer::Go);
  CHECK(point.propose() == 8);
  // Node 2 gets to the proposal first and must wait for the agreement.
  CHECK(point.at_boundary(2, 8, false) == Answer::Wait);
  // Another process proposed 10: everyone goes on to it.
  std::thread agreement([&] { point.agree(10); });
  CHECK(point.wait_for_agreement());
  agreement.join();
  CHECK(point.at_boundary(2, 8, false) == Answer::Go);
  CHECK(point.at_boundary(3, 8, false) == Answer::Go);
  CHECK(point.at_boundary(3, 9, false) == Answer::Go);
  CHECK(point.at_boundary(3, 10, false) == Answer::Stop);
  CHECK(point.at_boundary(2, 10, false) == Answer::Stop);

  // The agreement never comes (a peer failed): the wait ends, nobody waits again.
  StopPoint failed(0, 1, 0, true);
  CHECK(failed.propose() == 1);
  CHECK(failed.at_boundary(0, 1, true) == Answer::Wait);
  std::thread abandon([&] { failed.abandon(); });
  CHECK_FALSE(failed.wait_for_agreement());
  abandon.join();
  CHECK(failed.at_boundary(0, 1, true) == Answer::Go);
}

TEST_CASE("checkpoint.interval writes complete step folders with an index and keeps the newest", "[checkpoint]") {
  TempDir dir("checkpoint-layout");
  json m = checkpointed_manifest(3, 5);
  m["train"]["max_steps"] = 17;
  m["checkpoint"]["keep"] = 3;
  train_into(m, dir / "run");
  // 5, 10, 15 and the last step, 17; the 3 newest are kept.
  const auto found = runtime::checkpoint::list_checkpoints(dir / "run");
  REQUIRE(found.size() == 3);
  CHECK(found.begin()->first == 10);
  CHECK(found.rbegin()->first == 17);
  for (const auto& entry : fs::directory_iterator(dir / "run" / "checkpoints"))
    CHECK(entry.path().filename().string().rfind("step-", 0) == 0);  // no partial folder left
  const json index = json::parse(read_text(dir / "run" / "checkpoints" / "step-15" / "index.json"));
  CHECK(index.at("step") == 15);
  CHECK(index.at("nodes") == 3);
  CHECK(index.at("abi").get<int>() == EXOGYM_ABI_VERSION);
  CHECK(index.at("plugins").at(1).at("name") == "allreduce");
  CHECK(index.at("manifest").at("settings").at("strategy").at("plugin") == "allreduce");
  CHECK(!index.at("manifest").at("settings").at("train").contains("max_steps"));
  for (int rank = 0; rank < 3; ++rank)
    CHECK(fs::exists(dir / "run" / "checkpoints" / "step-15" / ("node-" + std::to_string(rank) + ".safetensors")));
}

TEST_CASE("without checkpoint keys a run writes no checkpoints", "[checkpoint]") {
  TempDir dir("checkpoint-none");
  json m = small_manifest(2);
  train_into(m, dir / "run");
  CHECK(!fs::exists(dir / "run" / "checkpoints"));
  CHECK(json::parse(read_text(dir / "run" / "config.json")).at("checkpoint").at("interval") == 0);
}

TEST_CASE("every built-in strategy resumes bit for bit", "[checkpoint]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    SECTION(plugin) {
      TempDir dir("resume-" + plugin);
      json m = checkpointed_manifest(4, 3);
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      m["eval"]["interval"] = 4;
      // Stopped at 7 (not a multiple of H, nor of the interval): the final
      // checkpoint of the shorter run is where the longer one continues.
      require_exact_resume(m, dir, 7, 16);
    }
  }
}

TEST_CASE("sparseloco resumes bit for bit with every compressor of the library", "[checkpoint][compression]") {
  // Random-k draws its positions from the outer step's seed, so a resumed
  // run must draw the same ones; sign and quantize keep residuals too.
  for (const char* compressor : {"random_k", "sign", "quantize"}) {
    SECTION(compressor) {
      TempDir dir(std::string("resume-sparseloco-") + compressor);
      json m = checkpointed_manifest(4, 3);
      m["strategy"] = {{"plugin", "sparseloco"},
                       {"options",
                        {{"H", 3},
                         {"compressor", compressor},
                         {"chunk", 64},
                         {"density", 0.1},
                         {"quantize", "int8"},
                         {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}}};
      require_exact_resume(m, dir, 7, 16);
    }
  }
}

TEST_CASE("diloco with muon inside (MuLoCo) learns and resumes bit for bit", "[checkpoint][muon]") {
  TempDir dir("resume-muloco");
  json m = checkpointed_manifest(4, 3);
  // The MLP's two weights take Muon's step, its biases the AdamW fallback's;
  // a cosine schedule scales both between steps (its length given: the
  // shorter run's max_steps would change it).
  m["strategy"] = {{"plugin", "diloco"},
                   {"options",
                    {{"H", 4},
                     {"optimizer", {{"name", "muon"}, {"lr", 0.02}, {"adamw_lr", 3e-3}, {"weight_decay", 0.01}}},
                     {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 2}, {"max_steps", 16}}}}}};
  m["eval"]["interval"] = 4;
  const fs::path parts = require_exact_resume(m, dir, 7, 16);
  const auto validation = read_csv(parts / "validation.csv");
  REQUIRE(validation.size() >= 2);
  REQUIRE(validation.front().at("step") == "0");
  REQUIRE(validation.back().at("step") == "16");
  CHECK(std::stod(validation.back().at("global_loss")) < 0.9 * std::stod(validation.front().at("global_loss")));
}

TEST_CASE("streaming_diloco resumes bit for bit in the middle of an overlap window, exact and quantised",
          "[checkpoint][streaming]") {
  // H = 8, P = 4: fragments send after steps 7, 1, 3, 5 (+ 8k) and apply
  // tau = 3 steps later. After 7 steps fragment 3's sync of step 5 is in
  // flight (applied after step 8) and fragment 0 sends next.
  for (const std::string quantize : {"none", "int8"}) {
    SECTION(quantize) {
      TempDir dir("resume-streaming-" + quantize);
      json m = checkpointed_manifest(3, 7);
      m["checkpoint"]["keep"] = 5;
      m["strategy"] = {{"plugin", "streaming_diloco"},
                       {"options",
                        {{"H", 8},
                         {"fragments", 4},
                         {"tau", 3},
                         {"alpha", 0.25},
                         {"quantize", quantize},
                         // The quantised run keeps error-feedback residuals too.
                         {"error_feedback", quantize == "none" ? 0.0 : 0.5},
                         {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
      auto node_state = [](const fs::path& run, int64_t step) {
        std::map<std::string, at::Tensor> saved;
        for (auto& [name, tensor] :
             runtime::checkpoint::read_node_state(run / "checkpoints" / ("step-" + std::to_string(step)), 1, step)
                 .file.tensors)
          saved[name] = tensor;
        return saved;
      };
      const std::string at3 = "strategy.module0.fragment.3.";
      SECTION("from a checkpoint inside the run: the transfer is still in flight, on the clock too") {
        m["train"]["max_steps"] = 20;
        train_into(m, dir / "whole");
        m["train"]["max_steps"] = 10;
        train_into(m, dir / "parts");
        resume_in(dir / "parts", {"train.max_steps=20"}, 7);
        require_same_run(dir / "whole", dir / "parts");
        const auto saved = node_state(dir / "parts", 7);
        CHECK(saved.at(at3 + "pending_step").item<int64_t>() == 5);
        CHECK(saved.count(at3 + "pending.work") == 1);
        CHECK(saved.at(at3 + "pending.work").numel() > 0);  // a transfer the clock still runs
        CHECK(saved.count(at3 + "residual.0") == (quantize == "none" ? 0 : 1));
        CHECK(saved.count("strategy.module0.fragment.2.pending_step") == 0);  // sent at 3, applied at 6
        CHECK(saved.at("strategy.module0.fragment.2.outer_step").item<int64_t>() == 6);
      }
      SECTION("extending a finished run: the sync in flight at its end is applied on schedule") {
        const fs::path parts = require_exact_resume(m, dir, 7, 20);
        const auto saved = node_state(parts, 7);
        CHECK(saved.at(at3 + "pending_step").item<int64_t>() == 5);
        CHECK(saved.at(at3 + "pending.work").numel() > 0);  // in flight
      }
    }
  }
}

TEST_CASE("the CNN with BatchNorm and dropout resumes bit for bit", "[checkpoint]") {
  TempDir dir("resume-cnn");
  json m = checkpointed_manifest(2, 4);
  m["model"] = {{"plugin", "cnn"}, {"options", {{"channels", {4, 8}}, {"hidden", 16}, {"dropout", true}}}};
  m["data"] = {{"train", {{"dataset", "mnist"}, {"path", mnist_dir().string()}}},
               {"val", {{"dataset", "mnist"}, {"path", mnist_dir().string()}}}};
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 3}}}};
  m["eval"] = {{"interval", 5}, {"size", 64}};
  require_exact_resume(m, dir, 5, 9);
}

TEST_CASE("nanoGPT with dropout resumes bit for bit", "[checkpoint]") {
  TempDir dir("resume-gpt");
  json m = text_manifest(2, 10);
  m["model"]["options"]["dropout"] = 0.2;
  m["checkpoint"] = {{"interval", 3}};
  m["compute"] = {{"step_time", "10ms"}};
  m["eval"]["interval"] = 4;
  require_exact_resume(m, dir, 5, 10);
}

TEST_CASE("resuming from an older checkpoint with --from-step cuts the run back to it", "[checkpoint]") {
  TempDir dir("resume-from-step");
  json m = checkpointed_manifest(2, 4);
  m["checkpoint"]["keep"] = 5;
  m["train"]["max_steps"] = 12;
  train_into(m, dir / "whole");
  train_into(m, dir / "again");
  // Resuming a finished run from step 4 redoes steps 4..12 and ends equal.
  resume_in(dir / "again", {}, 4);
  require_same_run(dir / "whole", dir / "again");
}

}  // namespace exogym::test
