#include "exogym/runtime/sim/participation.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <unordered_map>
#include <utility>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::sim {

namespace {

constexpr uint64_t kRoundStream = 0x5041525449434950ULL;   // "PARTICIP": round k's draw
constexpr uint64_t kRedrawStream = 0x5041525452455752ULL;  // "PARTREDR": a draw again within a round

// Uniform in [0, n): rejection of the low values that would make `% n`
// favour small results.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  while (true) {
    const uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

}  // namespace

int participants(const ParticipationSpec& spec, int live) {
  if (spec.per_round) return std::min(*spec.per_round, live);
  const double exact = *spec.fraction * live;
  const double whole = std::round(exact);
  const double count = std::abs(exact - whole) <= 1e-9 * std::max(1.0, exact) ? whole : std::ceil(exact);
  return std::clamp(static_cast<int>(count), 1, live);
}

std::vector<int> draw_participants(uint64_t generator_seed, const std::vector<int>& live, int count) {
  EXOGYM_CHECK_INTERNAL(count >= 1 && count <= static_cast<int>(live.size()), "a draw of more nodes than are alive");
  std::mt19937_64 rng(generator_seed);
  std::vector<int> pool = live;
  const size_t n = pool.size();
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    std::swap(pool[i], pool[i + uniform_below(rng, n - i)]);
  }
  pool.resize(static_cast<size_t>(count));
  std::sort(pool.begin(), pool.end());
  return pool;
}

std::vector<int> draw_clients(uint64_t generator_seed, int population, int count) {
  EXOGYM_CHECK_INTERNAL(count >= 1 && count <= population, "a draw of more clients than the population");
  std::mt19937_64 rng(generator_seed);
  // pool[i] is i unless a swap moved another client there.
  std::unordered_map<int, int> moved;
  auto at = [&](int i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int> drawn(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const int j = i + static_cast<int>(uniform_below(rng, static_cast<uint64_t>(population - i)));
    const int picked = at(j);
    moved[j] = at(i);
    drawn[static_cast<size_t>(i)] = picked;
  }
  std::sort(drawn.begin(), drawn.end());
  return drawn;
}

Participation::Participation(ParticipationSpec spec, int64_t round_steps, uint64_t seed)
    : spec_(std::move(spec)), round_steps_(round_steps), seed_(seed) {
  EXOGYM_CHECK_INTERNAL(round_steps_ >= 1, "a participation round of no steps");
}

std::vector<int> Participation::take_part(int64_t step, const std::vector<int>& alive) {
  EXOGYM_CHECK_INTERNAL(!alive.empty(), "no node alive to draw from");
  const int count = participants(spec_, static_cast<int>(alive.size()));
  if (starts_round(step)) {
    const auto round = static_cast<uint64_t>(step / round_steps_);
    drawn_ = draw_participants(sdk::derive_seed(seed_, kRoundStream, round), alive, count);
    return drawn_;
  }
  std::vector<int> kept;
  std::set_intersection(drawn_.begin(), drawn_.end(), alive.begin(), alive.end(), std::back_inserter(kept));
  if (!kept.empty()) return kept;
  drawn_ = draw_participants(sdk::derive_seed(seed_, kRedrawStream, static_cast<uint64_t>(step)), alive, count);
  return drawn_;
}

std::vector<int> Participation::take_clients(int64_t round, const std::vector<int>* available) {
  const int pool = available ? static_cast<int>(available->size()) : *spec_.clients;
  EXOGYM_CHECK_INTERNAL(pool >= 1, "no client to draw from");
  const int count = participants(spec_, pool);
  const uint64_t seed = sdk::derive_seed(seed_, kRoundStream, static_cast<uint64_t>(round));
  drawn_ = available ? draw_participants(seed, *available, count) : draw_clients(seed, pool, count);
  return drawn_;
}

nlohmann::json Participation::state() const { return {{"drawn", drawn_}}; }

void Participation::restore(const nlohmann::json& state) { drawn_ = state.at("drawn").get<std::vector<int>>(); }

}  // namespace exogym::runtime::sim
