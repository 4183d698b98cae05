// Partial participation's draws (sim/participation.h): how many nodes a
// round takes, that the draws follow from the seed and the round alone, that
// they are uniform, and what a round does when drawn nodes fail.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "exogym/runtime/sim/participation.h"
#include "testing.h"

namespace exogym::test {

namespace sim = runtime::sim;

namespace {

std::vector<int> rank_list(int n) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) out.push_back(r);
  return out;
}

sim::ParticipationSpec per_round(int n) {
  sim::ParticipationSpec spec;
  spec.per_round = n;
  return spec;
}

sim::ParticipationSpec fraction(double f) {
  sim::ParticipationSpec spec;
  spec.fraction = f;
  return spec;
}

}  // namespace

TEST_CASE("participation: a round takes per_round nodes, or ceil(fraction x live), at least 1", "[participation]") {
  CHECK(sim::participants(per_round(3), 10) == 3);
  CHECK(sim::participants(per_round(3), 2) == 2);  // failures left fewer nodes than per_round
  CHECK(sim::participants(fraction(1.0), 7) == 7);
  CHECK(sim::participants(fraction(0.25), 10) == 3);  // 2.5 rounds up
  CHECK(sim::participants(fraction(0.1), 30) == 3);   // 3.0000000000000004 in binary: still 3
  CHECK(sim::participants(fraction(0.7), 10) == 7);   // 6.999999999999999 in binary: 7
  CHECK(sim::participants(fraction(0.01), 10) == 1);
  CHECK(sim::participants(fraction(1e-9), 1) == 1);
}

TEST_CASE("participation: a draw is the same for the same seed and round, of the right size, sorted and distinct",
          "[participation]") {
  const std::vector<int> live = {0, 2, 3, 5, 8, 9, 11};
  const std::vector<int> a = sim::draw_participants(42, live, 4);
  CHECK(a == sim::draw_participants(42, live, 4));
  REQUIRE(a.size() == 4);
  CHECK(std::is_sorted(a.begin(), a.end()));
  CHECK(std::set<int>(a.begin(), a.end()).size() == 4);
  for (int node : a) CHECK(std::binary_search(live.begin(), live.end(), node));
  CHECK(sim::draw_participants(42, live, 7) == live);

  // A round's draw depends on the seed and the round only: asking for round
  // 5 first, or after rounds 0 to 4, gives the same nodes.
  sim::Participation in_order(per_round(3), 4, 7), straight_to_5(per_round(3), 4, 7);
  std::vector<std::vector<int>> draws;
  for (int64_t round = 0; round <= 5; ++round) draws.push_back(in_order.take_part(round * 4, rank_list(10)));
  CHECK(straight_to_5.take_part(20, rank_list(10)) == draws.back());
  CHECK(sim::Participation(per_round(3), 4, 8).take_part(20, rank_list(10)) != draws.back());  // another seed
  // Rounds differ: among 200 rounds of 3 nodes out of 10 (120 possible draws),
  // many distinct draws.
  std::set<std::vector<int>> distinct;
  sim::Participation p(per_round(3), 1, 7);
  for (int64_t round = 0; round < 200; ++round) distinct.insert(p.take_part(round, rank_list(10)));
  CHECK(distinct.size() > 80);
}

TEST_CASE("participation: over many rounds every node is drawn as often, within 5 standard deviations",
          "[participation]") {
  constexpr int kNodes = 10, kPerRound = 3, kRounds = 20000;
  sim::Participation p(per_round(kPerRound), 1, 1234);
  std::map<int, int> counts;
  std::map<std::pair<int, int>, int> pairs;
  for (int64_t round = 0; round < kRounds; ++round) {
    const std::vector<int> drawn = p.take_part(round, rank_list(kNodes));
    REQUIRE(drawn.size() == kPerRound);
    for (size_t i = 0; i < drawn.size(); ++i) {
      ++counts[drawn[i]];
      for (size_t j = i + 1; j < drawn.size(); ++j) ++pairs[{drawn[i], drawn[j]}];
    }
  }
  // Each node: Binomial(kRounds, 0.3).
  const double q = double(kPerRound) / kNodes, mean = kRounds * q, sd = std::sqrt(kRounds * q * (1 - q));
  for (int node = 0; node < kNodes; ++node) {
    INFO("node " << node << ": drawn " << counts[node] << " times");
    CHECK(std::abs(counts[node] - mean) < 5 * sd);
  }
  // Each pair together in 3·2/(10·9) of the rounds: no pair favoured.
  const double pq = double(kPerRound * (kPerRound - 1)) / (kNodes * (kNodes - 1));
  const double pair_mean = kRounds * pq, pair_sd = std::sqrt(kRounds * pq * (1 - pq));
  REQUIRE(pairs.size() == size_t(kNodes * (kNodes - 1) / 2));
  for (const auto& [pair, n] : pairs) {
    INFO("nodes " << pair.first << " and " << pair.second << ": together " << n << " times");
    CHECK(std::abs(n - pair_mean) < 5 * pair_sd);
  }
}

TEST_CASE("participation: within a round the draw stays, less the nodes down, and is restored from its state",
          "[participation]") {
  sim::Participation p(per_round(3), 5, 99);
  const std::vector<int> drawn = p.take_part(10, rank_list(8));
  CHECK(p.take_part(12, rank_list(8)) == drawn);  // the same round
  // A drawn node fails: the round goes on without it; nodes not drawn stay out.
  std::vector<int> without_first = rank_list(8);
  without_first.erase(std::find(without_first.begin(), without_first.end(), drawn[0]));
  CHECK(p.take_part(13, without_first) == std::vector<int>(drawn.begin() + 1, drawn.end()));

  // A checkpoint inside the round: a fresh sampler restored from it continues alike.
  sim::Participation resumed(per_round(3), 5, 99);
  resumed.restore(p.state());
  CHECK(resumed.take_part(14, rank_list(8)) == drawn);
  CHECK(resumed.take_part(15, rank_list(8)) == p.take_part(15, rank_list(8)));  // the next round's draw

  // Every drawn node down: the rest of the round is drawn again among the alive.
  sim::Participation q(per_round(2), 10, 5);
  const std::vector<int> first = q.take_part(0, rank_list(6));
  std::vector<int> others;
  for (int r : rank_list(6)) {
    if (!std::binary_search(first.begin(), first.end(), r)) others.push_back(r);
  }
  const std::vector<int> again = q.take_part(3, others);
  CHECK(again.size() == 2);
  for (int node : again) CHECK(std::binary_search(others.begin(), others.end(), node));
  CHECK(q.take_part(4, rank_list(6)) == again);  // and it holds for the rest of the round
}

}  // namespace exogym::test
