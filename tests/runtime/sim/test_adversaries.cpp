// Corrupted senders (runtime/sim/adversarial_communicator.h, the manifest's
// "adversaries"): each attack on what a node contributes, only while its
// entry is active, floating-point tensors only, reproducible noise, the
// node's own results left honest; and the manifest's checks.
#include <ATen/ATen.h>

#include <vector>

#include "exogym/runtime/sim/adversarial_communicator.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "strategy_runs.h"
#include "testing.h"

namespace sdk = exogym::sdk;
namespace sim = exogym::runtime::sim;
using exogym::test::floats;
using exogym::test::run_nodes;
using nlohmann::json;

namespace {}  // namespace

TEST_CASE("an adversary corrupts what it sends, only during its steps, floating-point tensors only", "[adversaries]") {
  const int K = 3;
  std::vector<at::Tensor> sums(K), gathered_ints(K), noise_a(K), noise_b(K);
  run_nodes(K, K, [&](int rank, sdk::Communicator& comm) {
    int64_t step = 0;
    sim::AdversarySpec flip;
    flip.node = 1;
    flip.scale = 2;
    flip.from_step = 1;
    flip.until_step = 3;
    sim::AdversarialCommunicator adversarial(
        comm, rank == 1 ? std::vector<sim::AdversarySpec>{flip} : std::vector<sim::AdversarySpec>{}, 7, &step);
    const at::Tensor mine = floats({1.0f * (rank + 1), 10.0f});
    std::vector<at::Tensor> t = {mine.clone()};
    adversarial.all_reduce(t, sdk::ReduceOp::Sum);  // step 0: honest
    LOCKED(CHECK(at::equal(t[0], floats({6, 30}))));
    step = 1;
    t = {mine.clone()};
    adversarial.all_reduce(t, sdk::ReduceOp::Sum);  // 1 - 2*2 + 3
    sums[rank] = t[0];
    // Integer tensors travel untouched; floating ones gathered corrupted.
    const auto g = adversarial.all_gather(std::vector<at::Tensor>{at::arange(3, at::kLong), mine});
    gathered_ints[rank] = g[1][0];
    LOCKED(CHECK(at::equal(g[1][1], floats({-4, -20}))));
    LOCKED(CHECK(at::equal(g[2][1], floats({3, 10}))));
    step = 3;  // until_step: honest again
    const auto h = adversarial.all_gather(std::vector<at::Tensor>{mine});
    LOCKED(CHECK(at::equal(h[1][0], floats({2, 10}))));
  });
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    CHECK(at::equal(sums[r], floats({0, 0})));  // 1 - 4 + 3, 10 - 20 + 10: the adversary receives it too
    CHECK(at::equal(gathered_ints[r], at::arange(3, at::kLong)));
  }

  // Noise: the same draw for the same seed, step and call; another for the next call.
  for (int pass = 0; pass < 2; ++pass) {
    run_nodes(2, 2, [&](int rank, sdk::Communicator& comm) {
      int64_t step = 5;
      sim::AdversarySpec noise;
      noise.node = 0;
      noise.attack = sim::Attack::Noise;
      noise.scale = 0.5;
      sim::AdversarialCommunicator adversarial(
          comm, rank == 0 ? std::vector<sim::AdversarySpec>{noise} : std::vector<sim::AdversarySpec>{}, 11, &step);
      const at::Tensor zeros = at::zeros({1000});
      const auto first = adversarial.all_gather(std::vector<at::Tensor>{zeros});
      const auto second = adversarial.all_gather(std::vector<at::Tensor>{zeros});
      if (rank == 1) {
        (pass == 0 ? noise_a : noise_b)[0] = first[0][0];
        (pass == 0 ? noise_a : noise_b)[1] = second[0][0];
        LOCKED(CHECK(at::equal(first[1][0], zeros)));
      }
    });
  }
  CHECK(at::equal(noise_a[0], noise_b[0]));
  CHECK_FALSE(at::equal(noise_a[0], noise_a[1]));
  CHECK(noise_a[0].std().item<double>() == Approx(0.5).epsilon(0.1));
}

TEST_CASE("adversaries in a manifest: a node outside the run and an empty range are refused", "[adversaries]") {
  exogym::test::TempDir dir("adversaries-errors");
  json m = exogym::test::small_manifest(3);
  m["adversaries"] = json::parse(R"([{"node": 3}])");
  REQUIRE_THROWS_WITH(exogym::test::run_json(m, dir.path()),
                      Catch::Contains("adversaries[0].node") && Catch::Contains("not in a run of 3 nodes"));
  m["adversaries"] = json::parse(R"([{"node": 1, "from_step": 5, "until_step": 5}])");
  REQUIRE_THROWS_WITH(exogym::test::run_json(m, dir.path()),
                      Catch::Contains("adversaries[0].until_step") && Catch::Contains("after from_step (5)"));
  m["adversaries"] = json::parse(R"([{"node": 1, "attack": "flip"}])");
  REQUIRE_THROWS_WITH(exogym::test::run_json(m, dir.path()), Catch::Contains("adversaries[0].attack"));
}
