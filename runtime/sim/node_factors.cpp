#include "exogym/runtime/sim/node_factors.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::sim {

namespace {

// Each quantity's stream of sdk::derive_seed, as the run's other draws.
uint64_t stream_of(NodeFactor what) {
  return what == NodeFactor::Speed ? 0x4E4F444553504545ULL   // "NODESPEE"
                                   : 0x4E4F444542414E44ULL;  // "NODEBAND"
}

// A uniform draw in (0, 1] from 53 bits (std:: distributions are the
// library's own algorithms, so their draws could change with the compiler).
double unit_interval(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

FactorDistribution read_factor_distribution(const nlohmann::json& value, const std::string& path) {
  FactorDistribution d;
  d.json_path = path;
  const std::string name = value.at("name");
  if (name == "lognormal") {
    d.kind = FactorDistribution::Kind::LogNormal;
    d.sigma = value.at("sigma");
    // Box-Muller's |Z| stays below sqrt(2 ln 2^53), about 8.6: with sigma at
    // most 10 every factor lies within e^±86 (about 1e±37), where the times
    // and bandwidths made of it stay finite; sigma 1000 draws infinity or 0.
    if (d.sigma > 10) {
      throw sdk::ConfigError(path + ".sigma", "expected a spread of at most 10 (factors within e^±86), got " +
                                                  sdk::json_excerpt(value.at("sigma")));
    }
  } else if (name == "uniform") {
    d.kind = FactorDistribution::Kind::Uniform;
    d.low = value.at("low");
    d.high = value.at("high");
    if (d.high < d.low)
      throw sdk::ConfigError(path + ".high", "expected at least low (" + sdk::json_excerpt(value.at("low")) +
                                                 "), got " + sdk::json_excerpt(value.at("high")));
  } else {
    d.kind = FactorDistribution::Kind::Tiers;
    d.values = value.at("values").get<std::vector<double>>();
    if (d.values.empty()) throw sdk::ConfigError(path + ".values", "expected at least one value, got []");
    if (value.contains("weights")) {
      d.weights = value.at("weights").get<std::vector<double>>();
      if (d.weights.size() != d.values.size())
        throw sdk::ConfigError(path + ".weights", "expected one weight per value (" + std::to_string(d.values.size()) +
                                                      "), got " + std::to_string(d.weights.size()));
    } else {
      d.weights.assign(d.values.size(), 1.0);
    }
  }
  return d;
}

double draw_factor(const FactorDistribution& d, NodeFactor what, uint64_t run_seed, int node) {
  std::mt19937_64 rng(sdk::derive_seed(run_seed, stream_of(what), static_cast<uint64_t>(node)));
  switch (d.kind) {
    case FactorDistribution::Kind::LogNormal: {
      // Box-Muller: one standard normal from two uniforms.
      const double u1 = unit_interval(rng), u2 = unit_interval(rng);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      return std::exp(d.sigma * z);
    }
    case FactorDistribution::Kind::Uniform:
      return d.low + (d.high - d.low) * (1.0 - unit_interval(rng));  // [low, high)
    case FactorDistribution::Kind::Tiers: {
      const double total = std::accumulate(d.weights.begin(), d.weights.end(), 0.0);
      double point = (1.0 - unit_interval(rng)) * total;  // [0, total)
      for (size_t i = 0; i < d.values.size(); ++i) {
        if (point < d.weights[i]) return d.values[i];
        point -= d.weights[i];
      }
      return d.values.back();  // rounding at the very top
    }
  }
  return 1.0;
}

double largest_factor(const FactorDistribution& d, NodeFactor what, uint64_t run_seed, int nodes) {
  switch (d.kind) {
    case FactorDistribution::Kind::Uniform:
      return d.high;
    case FactorDistribution::Kind::Tiers: {
      double largest = 0;
      for (size_t i = 0; i < d.values.size(); ++i)
        if (d.weights[i] > 0) largest = std::max(largest, d.values[i]);
      return largest;
    }
    case FactorDistribution::Kind::LogNormal:
      break;
  }
  double largest = 0;
  for (int node = 0; node < nodes; ++node) largest = std::max(largest, draw_factor(d, what, run_seed, node));
  return largest;
}

}  // namespace exogym::runtime::sim
