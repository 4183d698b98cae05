#pragma once
// Robust aggregation: combining what the nodes sent so that a few corrupted
// senders cannot drag the result anywhere (docs/plugins.md#robust-aggregation).
// FedAvg's "aggregator" option (fedavg.h) uses these in place of the mean.
//
// Input: by_rank[r][i], rank r's tensor i (every rank sends tensors of the
// same shapes), in rank order. Every function is computed in fp32 on the
// CPU and returns tensors shaped as the inputs, in their dtype; the result
// is a function of the values and their rank order alone, so every node
// computes the same bits.
//   mean          Σ_r x_r / R, summed in rank order (all_reduce's Avg)
//   median        coordinate-wise: the middle value of the R sorted values,
//                 the mean of the two middle ones when R is even (NaN sorts
//                 above every number)
//   trimmed_mean  coordinate-wise: the mean of the sorted values without
//                 the t = floor(trim * R) smallest and t largest (Yin et
//                 al. 2018); trim in [0, 0.5), so at least one is left
//   krum          the tensors of one rank (Blanchard et al. 2017): the one
//                 whose squared distances, over every tensor, to its
//                 R - f - 2 nearest other ranks sum to the least (the lower
//                 rank on ties); needs R >= f + 3
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace exogym::modules {

enum class Aggregator { Mean, Median, TrimmedMean, Krum };

// "mean", "median", "trimmed_mean", "krum", as options spell them;
// aggregator_from_name throws sdk::ConfigError at `json_path` for another.
const char* to_string(Aggregator aggregator);
std::vector<std::string> aggregator_names();
Aggregator aggregator_from_name(const std::string& name, const std::string& json_path);

struct AggregatorSpec {
  Aggregator kind = Aggregator::Mean;
  double trim = 0.1;      // trimmed_mean: the fraction cut at each end, in [0, 0.5)
  int64_t byzantine = 1;  // krum: f, the corrupted senders it tolerates
};

// The aggregate of `by_rank` (at least one rank). Throws sdk::Error for a
// trim outside [0, 0.5) and for krum with R < f + 3, naming R and what it
// needs. `chosen` (krum, when not null) receives
// the position in by_rank of the rank chosen; the others leave it alone.
std::vector<at::Tensor> aggregate(const std::vector<std::vector<at::Tensor>>& by_rank, const AggregatorSpec& spec,
                                  int64_t* chosen = nullptr);

}  // namespace exogym::modules
