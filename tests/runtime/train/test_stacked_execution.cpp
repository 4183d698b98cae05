// Stacked execution (train/node_stacks.h, docs/performance.md#stacked-execution):
// the nodes' forward and backward as one computation over [K, ...] stacks
// give the per-node run, bit for bit on the CPU: the MLP and nanoGPT with
// every built-in strategy, the CNN, nodes of two intra-op threads, and the
// paths where only some nodes compute (faults, participation, churn); the
// runs fall back, or refuse "stacked", where it cannot apply, and say so;
// checkpoints move between the two.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "cli_helpers.h"
#include "exogym/runtime/train/stack_group.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "lm_fixtures.h"
#include "strategy_runs.h"
#include "testing.h"

using exogym::test::read_text;
using exogym::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;
using exogym::test::summary_of;

namespace {

// `m` with a fixed step time, so that the simulated clocks are compared too.
json timed(json m) {
  m["compute"] = {{"step_time", "10ms"}};
  return m;
}

json with_execution(json m, const char* execution) {
  m["execution"] = execution;
  return m;
}

// The rows of a CSV, each split at its commas.
std::vector<std::vector<std::string>> csv_rows(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream text(read_text(file));
  for (std::string line; std::getline(text, line);) {
    rows.emplace_back();
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) rows.back().push_back(cell);
  }
  return rows;
}

// The same training in both folders: require_same_run, but for the
// training loss each node reports, a mean over its batch that the stacked
// forward reduces in another order (its gradients, and so everything the
// run computes from them, are the same bits): within `tolerance` relative.
void require_same_training(const fs::path& expected, const fs::path& actual, double tolerance = 1e-6) {
  const auto a = csv_rows(expected / "train.csv"), b = csv_rows(actual / "train.csv");
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() > 1);
  for (size_t r = 0; r < a.size(); ++r) {
    REQUIRE(a[r].size() == b[r].size());
    for (size_t c = 0; c < a[r].size(); ++c) {
      INFO("train.csv row " << r << ", column " << a[0][c]);
      if (r == 0 || (a[0][c] != "train_loss" && a[0][c] != "train_perplexity")) {
        CHECK(a[r][c] == b[r][c]);
      } else {
        // The perplexity as the loss it is the exponential of (a run that
        // diverged has perplexities of millions).
        const bool exponential = a[0][c] == "train_perplexity";
        const auto loss = [&](const std::string& cell) {
          return exponential ? std::log(std::stod(cell)) : std::stod(cell);
        };
        const double x = loss(a[r][c]), y = loss(b[r][c]);
        CHECK(std::abs(x - y) <= tolerance * std::abs(x));
      }
    }
  }
  // Everything else, bit for bit, with the training loss columns of the
  // copies made equal.
  TempDir copies("stacked-copies");
  for (const auto* run : {&expected, &actual}) {
    const fs::path copy = copies / (run == &expected ? "expected" : "actual");
    fs::copy(*run, copy, fs::copy_options::recursive);
    fs::copy_file(expected / "train.csv", copy / "train.csv", fs::copy_options::overwrite_existing);
    json summary = summary_of(copy);
    summary["last_train_loss"] = 0;
    std::ofstream(copy / "summary.json") << summary.dump(2);
  }
  exogym::test::require_same_run(copies / "expected", copies / "actual");
}

// The built-in strategies whose local step comes first after the backward
// and say so (StackedSteps::take_after_backward): the compositions
// (sdk/compose.h) and DES-LOC.
std::set<std::string> steps_after_backward() {
  return {"fedavg", "diloco",     "sparta", "sparta_diloco",    "streaming_diloco",
          "noloco", "sparseloco", "desloc", "overlapped_diloco"};
}

// Trains `m` per node and stacked into dir/<name>-per_node and -stacked;
// returns the two run folders.
std::pair<fs::path, fs::path> both_ways(const json& m, const TempDir& dir, const std::string& name) {
  const fs::path per_node = exogym::test::train_in(with_execution(m, "per_node"), dir, name + "-per_node");
  const fs::path stacked = exogym::test::train_in(with_execution(m, "stacked"), dir, name + "-stacked");
  return {per_node, stacked};
}

}  // namespace

TEST_CASE("stacked MLP runs are the per-node runs bit for bit, with every built-in strategy", "[stacked]") {
  TempDir dir("stacked");
  for (const auto& [plugin, options] : exogym::test::builtin_strategies()) {
    INFO(plugin);
    json m = timed(exogym::test::with_strategy(4, plugin, options));
    m["parallelism"] = 2;  // on any machine: parts of 2, side by side
    const auto [per_node, stacked] = both_ways(m, dir, plugin);
    require_same_training(per_node, stacked);
    // Every local step one over the stacks (LocalStep::step_together), but
    // DeMo's, which takes none (its sign-SGD step is its own); those of the
    // strategies that step first, right after the backward, a part per
    // compute slot.
    const int64_t node_steps = 4 * m["train"]["max_steps"].get<int64_t>();
    const bool composed = steps_after_backward().count(plugin) > 0;
    const json local_steps =
        plugin == "demo" ? json{{"together", 0}, {"after_backward", 0}, {"apart", 0}}
                         : json{{"together", node_steps}, {"after_backward", composed ? node_steps : 0}, {"apart", 0}};
    CHECK(summary_of(stacked)["execution"] ==
          json({{"mode", "stacked"}, {"stacks", {4}}, {"part_sizes", {2}}, {"local_steps", local_steps}}));
    CHECK(summary_of(per_node)["execution"]["mode"] == "per_node");
    CHECK(summary_of(per_node)["execution"]["reason"] == "execution is \"per_node\"");
  }
}

TEST_CASE("stacked runs whose nodes have two intra-op threads each are the per-node runs bit for bit", "[stacked]") {
  // Parts of 2 nodes side by side: each part's thread takes its nodes in
  // turn with their two threads, as they compute per node (shared among
  // the two threads, a node each, they rounded otherwise).
  TempDir dir("stacked");
  json m =
      timed(exogym::test::with_strategy(4, "diloco", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}));
  m["threads"] = 2;
  m["parallelism"] = 2;
  m["model"]["options"] = {{"input_size", 784}, {"hidden", {256}}, {"num_classes", 10}};
  for (const char* split : {"train", "val"}) {
    m["data"][split]["options"]["features"] = 784;
    m["data"][split]["options"]["classes"] = 10;
  }
  m["train"]["max_steps"] = 6;
  const auto [per_node, stacked] = both_ways(m, dir, "threads");
  require_same_training(per_node, stacked);
  CHECK(summary_of(stacked)["execution"]["part_sizes"] == json({2}));
}

TEST_CASE("stacked CNN runs, convolutions and batch norm with dropout, are the per-node runs bit for bit",
          "[stacked]") {
  TempDir dir("stacked");
  // DDP computes its 4 nodes in one pass (its local step waits for the
  // all-reduce); DiLoCo in parts of 2, each stepping after its backward.
  for (const auto& [plugin, options] :
       {std::pair<std::string, json>{"allreduce", json::object()}, {"diloco", {{"H", 3}}}}) {
    INFO(plugin);
    json m = timed(exogym::test::with_strategy(4, plugin, options));
    m["parallelism"] = 2;
    m["model"] = {
        {"plugin", "cnn"},
        {"options", {{"image_size", 8}, {"channels", {4}}, {"hidden", 16}, {"num_classes", 4}, {"in_channels", 1}}}};
    m["data"]["train"]["options"]["features"] = 64;
    m["data"]["val"]["options"]["features"] = 64;
    const auto [per_node, stacked] = both_ways(m, dir, "cnn-" + plugin);
    require_same_training(per_node, stacked);
    CHECK(summary_of(stacked)["execution"]["mode"] == "stacked");
  }
}

TEST_CASE("stacked runs where only some nodes compute are the per-node runs bit for bit", "[stacked]") {
  TempDir dir("stacked");
  json diloco =
      timed(exogym::test::with_strategy(6, "diloco", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}));
  SECTION("a node fails and rejoins") {
    json m = diloco;
    m["faults"] = json::array({{{"node", 2}, {"fail_at", 4}, {"rejoin_at", 10}}});
    const auto [per_node, stacked] = both_ways(m, dir, "faults");
    require_same_training(per_node, stacked);
  }
  SECTION("partial participation, SCAFFOLD's client state included") {
    json m =
        timed(exogym::test::with_strategy(6, "scaffold", {{"H", 3}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}));
    m["participation"] = {{"per_round", 3}};
    const auto [per_node, stacked] = both_ways(m, dir, "participation");
    require_same_training(per_node, stacked);
  }
  SECTION("churn on the simulated clock") {
    const auto [per_node, stacked] = both_ways(exogym::test::timed_churn_manifest(), dir, "churn");
    require_same_training(per_node, stacked);
  }
  SECTION("gradient accumulation over micro-batches") {
    json m = diloco;
    m["train"]["minibatch_size"] = 4;
    const auto [per_node, stacked] = both_ways(m, dir, "micro");
    require_same_training(per_node, stacked);
  }
}

TEST_CASE("a stack's parts: at most 4 MiB of gradients and a part per compute slot on the CPU, one on a GPU",
          "[stacked]") {
  using exogym::runtime::train::stack_part_size;
  const size_t mlp = 203530 * 4, nanogpt_small = 819200 * 4, tiny = 4752;
  CHECK(stack_part_size(4096, mlp, 2) == 5);  // 4 MiB / 814,120 bytes
  CHECK(stack_part_size(64, mlp, 2) == 5);
  CHECK(stack_part_size(4, mlp, 2) == 2);            // a part per compute slot
  CHECK(stack_part_size(4, tiny, 1) == 4);           // one slot: the whole stack fits
  CHECK(stack_part_size(5, tiny, 2) == 3);           // parts of 3 and 2
  CHECK(stack_part_size(8, nanogpt_small, 2) == 1);  // beyond 4 MiB a part: one node
  CHECK(stack_part_size(4096, 100 << 20, 16) == 1);
  CHECK(stack_part_size(32, nanogpt_small, 0) == 1);
  CHECK(stack_part_size(32, 0, 2) == 32);  // on a GPU
  // A size of the user's is the only bound.
  ::setenv("EXOGYM_STACK_PART_BYTES", std::to_string(4 * nanogpt_small).c_str(), 1);
  CHECK(stack_part_size(8, nanogpt_small, 2) == 4);
  CHECK(stack_part_size(8, nanogpt_small, 16) == 4);
  ::setenv("EXOGYM_STACK_PART_BYTES", std::to_string(1000 * tiny).c_str(), 1);
  CHECK(stack_part_size(8, tiny, 2) == 8);
  ::unsetenv("EXOGYM_STACK_PART_BYTES");
}

TEST_CASE("a stack computes and steps part by part where the local step comes first: the per-node run bit for bit",
          "[stacked]") {
  // Parts of 3 nodes: the MLP's gradients are 4,752 bytes a node.
  struct PartBytes {
    PartBytes() { ::setenv("EXOGYM_STACK_PART_BYTES", "14300", 1); }
    ~PartBytes() { ::unsetenv("EXOGYM_STACK_PART_BYTES"); }
  } part_bytes;
  TempDir dir("stacked");
  json m =
      timed(exogym::test::with_strategy(6, "diloco", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}));
  m["parallelism"] = 2;
  m["train"]["minibatch_size"] = 4;  // micro-batches: each part divides its gradients before it steps
  // Node 1 down from step 4 to 9: its part computes nodes 0 and 2, rows
  // gathered from the stacks. Back, its optimizer has started again: no two
  // rows of its part make a run, and the part's nodes take their own steps,
  // with the gradients they kept.
  m["faults"] = json::array({{{"node", 1}, {"fail_at", 4}, {"rejoin_at", 10}}});
  const auto [per_node, stacked] = both_ways(m, dir, "parts");
  require_same_training(per_node, stacked);
  const json execution = summary_of(stacked)["execution"];
  CHECK(execution["part_sizes"] == json({3}));
  const int64_t node_steps = 6 * 20 - 6, own = 3 * 10;
  CHECK(execution["local_steps"] ==
        json({{"together", node_steps - own},
              {"after_backward", node_steps - own},
              {"apart", own},
              {"apart_because",
               "the optimizer states of the nodes' parameter 0 (in the model's order) differ (a node's optimizer "
               "started again)"}}));
  // A bad setting names itself.
  ::setenv("EXOGYM_STACK_PART_BYTES", "lots", 1);
  CHECK_THROWS_WITH(exogym::test::train_in(with_execution(m, "stacked"), dir, "bad"),
                    Catch::Contains("EXOGYM_STACK_PART_BYTES must be a positive number of bytes, got \"lots\""));
}

TEST_CASE("a stack's local steps go apart where they cannot be one, and summary.json says why", "[stacked]") {
  TempDir dir("stacked");
  SECTION("an optimizer that does not step stacks") {
    const json rmsprop = {{"name", "rmsprop"}, {"lr", 0.01}};
    const auto [per_node, stacked] =
        both_ways(timed(exogym::test::with_strategy(4, "diloco", {{"H", 3}, {"optimizer", rmsprop}})), dir, "rmsprop");
    require_same_training(per_node, stacked);
    const json local_steps = summary_of(stacked)["execution"]["local_steps"];
    CHECK(local_steps["together"] == 0);
    CHECK(local_steps["apart"] == 4 * 20);
    CHECK(local_steps["apart_because"] == "the optimizer \"rmsprop\" steps no stacks (adamw, adam, sgd and muon do)");
  }
}

TEST_CASE("MuLoCo stacked, DiLoCo with Muon inside, is the per-node run bit for bit, every step taken together",
          "[stacked]") {
  TempDir dir("stacked");
  const json muon = {{"name", "muon"}, {"lr", 0.01}};
  const auto [per_node, stacked] =
      both_ways(timed(exogym::test::with_strategy(4, "diloco", {{"H", 3}, {"optimizer", muon}})), dir, "muon");
  require_same_training(per_node, stacked);
  const json local_steps = summary_of(stacked)["execution"]["local_steps"];
  CHECK(local_steps["together"] == 4 * 20);
  CHECK(local_steps["apart"] == 0);
}

TEST_CASE("a stack with a node down, and one whose optimizer started again, steps in runs of rows", "[stacked]") {
  TempDir dir("stacked");
  json m =
      timed(exogym::test::with_strategy(4, "diloco", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}));
  m["faults"] = json::array({{{"node", 1}, {"fail_at", 4}, {"rejoin_at", 10}}});
  m["parallelism"] = 1;  // one compute slot: the stack is one part
  const auto [per_node, stacked] = both_ways(m, dir, "down");
  require_same_training(per_node, stacked);
  const json local_steps = summary_of(stacked)["execution"]["local_steps"];
  // Steps 0 to 3 one run; 4 to 9 with node 1 down the runs of nodes 0 and
  // of 2 and 3; from 10 on node 1's optimizer has started again (its
  // AdamW's step count is not the others'), a run of its own between them.
  // Every step taken together.
  CHECK(local_steps["together"] == 4 * 4 + 3 * 6 + 4 * 10);
  CHECK(local_steps["apart"] == 0);
}

TEST_CASE("a checkpoint written stacked resumes per node, and back, as the run that never stopped", "[stacked]") {
  TempDir dir("stacked");
  json m = exogym::test::checkpointed_manifest(4, 6);
  m["checkpoint"]["keep"] = 10;
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 4}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
  const fs::path whole = dir / "whole" / "run";
  exogym::test::train_into(with_execution(m, "per_node"), whole);
  for (const char* first : {"stacked", "per_node"}) {
    const std::string then = std::string(first) == "stacked" ? "per_node" : "stacked";
    INFO(first << " then " << then);
    const fs::path run = dir / first / "run";
    exogym::test::train_into(with_execution(m, first), run);
    exogym::test::resume_in(run, {"execution=" + then}, 12);
    require_same_training(whole, run);
    CHECK(summary_of(run)["execution"]["mode"] == then);
  }
}

TEST_CASE("auto stacks where it can and says why not where it cannot, stacked refuses at start-up", "[stacked]") {
  TempDir dir("stacked");
  json m = exogym::test::small_manifest(4);
  SECTION("on the CPU the MLP's nodes compute on their own, as they are faster so") {
    const json execution = summary_of(exogym::test::train_in(m, dir, "mlp"))["execution"];
    CHECK(execution["mode"] == "per_node");
    CHECK_THAT(execution["reason"].get<std::string>(),
               Catch::StartsWith("on the CPU, nodes computing side by side are faster than one stacked computation"));
    // "stacked" stacks them anyway.
    const json stacked = summary_of(exogym::test::train_in(with_execution(m, "stacked"), dir, "mlp-stacked"));
    CHECK(stacked["execution"]["mode"] == "stacked");
    CHECK(stacked["execution"]["stacks"] == json({4}));
  }
  SECTION("one node computes on its own") {
    const json execution = summary_of(exogym::test::train_in(exogym::test::small_manifest(1), dir, "one"))["execution"];
    CHECK(execution == json({{"mode", "per_node"}, {"stacks", json::array()}, {"reason", "one node in this process"}}));
  }
  SECTION("a model plugin without a stacked forward") {
    m["model"] = {{"plugin", "mode_probe"}, {"options", json::object()}};
    const json execution = summary_of(exogym::test::train_in(m, dir, "probe"))["execution"];
    CHECK(execution["mode"] == "per_node");
    CHECK_THAT(execution["reason"].get<std::string>(),
               Catch::StartsWith("the model plugin \"mode_probe\" (") && Catch::Contains("has no stacked forward"));
    const fs::path out = dir / "refused";
    fs::create_directories(out);
    CHECK_THROWS_WITH(exogym::test::run_json(with_execution(m, "stacked"), out),
                      Catch::StartsWith("execution: \"stacked\" cannot apply: the model plugin \"mode_probe\" ("));
    CHECK_FALSE(fs::exists(out / "run"));
  }
  SECTION("a stack that runs out of memory, one node at a time too, says what it held and what to set instead") {
    m["model"] = {{"plugin", "stack_oom"}, {"options", json::object()}};
    m["parallelism"] = 1;  // one part of the 4 nodes
    CHECK_THROWS_WITH(
        exogym::test::train_in(with_execution(m, "stacked"), dir, "oom"),
        Catch::Contains("step 0") &&
            Catch::Contains("the stack's forward and backward ran out of memory on cpu, computing its 4 nodes in parts "
                            "of 1 (std::bad_alloc). A stack holds the activations of the nodes it computes together") &&
            Catch::Contains("set a smaller train.minibatch_size") && Catch::Contains("\"execution\": \"per_node\""));
    // Per node, as the error suggests, it trains.
    CHECK(summary_of(exogym::test::train_in(m, dir, "oom-per-node"))["execution"]["mode"] == "per_node");
  }
  SECTION("an asynchronous strategy") {
    m = timed(exogym::test::with_strategy(4, "fedbuff", {{"H", 3}, {"buffer", 2}}));
    const json execution = summary_of(exogym::test::train_in(m, dir, "async"))["execution"];
    CHECK(execution["mode"] == "per_node");
    CHECK_THAT(execution["reason"].get<std::string>(), Catch::StartsWith("an asynchronous strategy"));
    const fs::path out = dir / "async-refused";
    fs::create_directories(out);
    CHECK_THROWS_WITH(exogym::test::run_json(with_execution(m, "stacked"), out),
                      Catch::StartsWith("execution: \"stacked\" cannot apply: an asynchronous strategy"));
    CHECK_FALSE(fs::exists(out / "run"));
  }
}

TEST_CASE("a stack whose pass runs out of memory in the first step takes smaller ones: the per-node run bit for bit",
          "[stacked]") {
  TempDir dir("stacked");
  // Passes of at most 3 nodes fit: the first pass, of 6, is undone (its
  // dropout draws and the buffer it counted in) and taken in halves, which
  // the later steps keep.
  const json adamw = {{"name", "adamw"}, {"lr", 0.01}};
  for (const char* strategy : {"diloco", "allreduce"}) {
    INFO(strategy);
    json m = timed(exogym::test::with_strategy(
        6, strategy, strategy == std::string("diloco") ? json({{"H", 3}, {"optimizer", adamw}}) : json::object()));
    m["model"] = {{"plugin", "stack_oom"}, {"options", {{"most_stacked", 3}}}};
    m["parallelism"] = 1;  // one part of the 6 nodes, as on a GPU
    m["faults"] = json::array({{{"node", 1}, {"fail_at", 4}, {"rejoin_at", 10}}});
    const auto [per_node, stacked] = both_ways(m, dir, strategy);
    require_same_training(per_node, stacked);
    const json execution = summary_of(stacked)["execution"];
    CHECK(execution["part_sizes"] == json({3}));
    CHECK(execution["parts_because"] ==
          "a pass of 6 nodes ran out of memory on cpu in the first step (std::bad_alloc)");
  }
}

TEST_CASE("stacked nanoGPT with dropout is the per-node run bit for bit over 200 steps, fp32 and bf16",
          "[stacked][slow]") {
  TempDir dir("stacked");
  for (const char* precision : {"fp32", "bf16"}) {
    INFO(precision);
    json m = timed(exogym::test::text_manifest(4, 200));
    m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 10}, {"optimizer", {{"name", "adamw"}, {"lr", 3e-3}}}}}};
    m["model"]["options"]["dropout"] = 0.1;
    // The MLP's second layer sums 512 inputs, in several BLAS blocks: where
    // its bias is added then matters (sdk/stacked.h, stacked_linear).
    m["model"]["options"]["n_embd"] = 128;
    m["precision"] = precision;
    const auto [per_node, stacked] = both_ways(m, dir, precision);
    require_same_training(per_node, stacked);
    // The same settings, the same bits.
    const fs::path again = exogym::test::train_in(with_execution(m, "stacked"), dir, std::string(precision) + "-again");
    exogym::test::require_same_run(stacked, again);
  }
}

TEST_CASE("stacked nanoGPT runs are the per-node runs bit for bit over 200 steps, with every built-in strategy",
          "[stacked][slow]") {
  TempDir dir("stacked");
  for (const auto& [plugin, options] : exogym::test::builtin_strategies()) {
    INFO(plugin);
    json m = timed(exogym::test::text_manifest(4, 200));
    m["strategy"] = {{"plugin", plugin}, {"options", options}};
    m["model"]["options"]["dropout"] = 0.1;
    m["model"]["options"]["n_embd"] = 128;  // a linear layer of 512 inputs (above)
    const auto [per_node, stacked] = both_ways(m, dir, plugin);
    require_same_training(per_node, stacked);
  }
}

TEST_CASE("stacked runs over two processes give the one-process run", "[stacked][slow]") {
  TempDir dir("stacked");
  json m =
      timed(exogym::test::with_strategy(4, "diloco", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}));
  m["execution"] = "stacked";
  m["parallelism"] = 1;  // on any machine: each process's stack one part
  const fs::path one = exogym::test::run_layout(dir, m, "one", {});
  const fs::path two = exogym::test::run_layout(dir, m, "two", {"--nproc", "2"});
  require_same_training(one, two);
  // The stack and the local steps of the writing process's nodes: 2 nodes, 20 steps.
  CHECK(summary_of(two)["execution"] ==
        json({{"mode", "stacked"},
              {"stacks", {2}},
              {"part_sizes", {2}},
              {"local_steps", {{"together", 2 * 20}, {"after_backward", 2 * 20}, {"apart", 0}}}}));
}
