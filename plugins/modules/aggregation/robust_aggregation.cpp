#include "exogym/modules/aggregation/robust_aggregation.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"

namespace exogym::modules {

namespace {

// Rank r's tensor i as fp32 on the CPU, one row per rank: (R, numel).
at::Tensor stacked(const std::vector<std::vector<at::Tensor>>& by_rank, size_t i) {
  std::vector<at::Tensor> rows;
  for (const auto& tensors : by_rank) rows.push_back(tensors.at(i).detach().to(at::kCPU, at::kFloat).reshape({-1}));
  return at::stack(rows);
}

at::Tensor like(const at::Tensor& flat, const at::Tensor& original) {
  return flat.reshape(original.sizes()).to(original.device(), original.scalar_type());
}

// The sorted values of every coordinate, rows lowest first: at::sort is a
// function of the values alone (equal values are interchangeable).
at::Tensor sorted_rows(const at::Tensor& rows) { return std::get<0>(at::sort(rows, /*dim=*/0)); }

// Σ over rows first .. last-1 in order, / count.
at::Tensor ordered_mean(const at::Tensor& rows, int64_t first, int64_t last) {
  at::Tensor sum = rows[first].clone();
  for (int64_t r = first + 1; r < last; ++r) sum.add_(rows[r]);
  return sum.div_(static_cast<double>(last - first));
}

int64_t krum_choice(const std::vector<std::vector<at::Tensor>>& by_rank, int64_t f) {
  const int64_t R = static_cast<int64_t>(by_rank.size());
  std::vector<std::vector<double>> distance(R, std::vector<double>(R, 0.0));
  for (size_t i = 0; i < by_rank.front().size(); ++i) {
    const at::Tensor rows = stacked(by_rank, i).to(at::kDouble);
    for (int64_t a = 0; a < R; ++a) {
      for (int64_t b = a + 1; b < R; ++b) {
        const double d = (rows[a] - rows[b]).square().sum().item<double>();
        distance[a][b] += d;
        distance[b][a] += d;
      }
    }
  }
  int64_t best = 0;
  double best_score = std::numeric_limits<double>::infinity();
  for (int64_t a = 0; a < R; ++a) {
    std::vector<double> others;
    for (int64_t b = 0; b < R; ++b) {
      if (b != a) others.push_back(distance[a][b]);
    }
    std::sort(others.begin(), others.end());
    double score = 0;
    for (int64_t j = 0; j < R - f - 2; ++j) score += others[static_cast<size_t>(j)];
    // A NaN score never wins: a rank that sent NaN is not chosen.
    if (score < best_score) {
      best_score = score;
      best = a;
    }
  }
  return best;
}

}  // namespace

const char* to_string(Aggregator aggregator) {
  switch (aggregator) {
    case Aggregator::Mean:
      return "mean";
    case Aggregator::Median:
      return "median";
    case Aggregator::TrimmedMean:
      return "trimmed_mean";
    case Aggregator::Krum:
      return "krum";
  }
  return "?";
}

std::vector<std::string> aggregator_names() { return {"mean", "median", "trimmed_mean", "krum"}; }

Aggregator aggregator_from_name(const std::string& name, const std::string& json_path) {
  for (Aggregator a : {Aggregator::Mean, Aggregator::Median, Aggregator::TrimmedMean, Aggregator::Krum}) {
    if (name == to_string(a)) return a;
  }
  throw sdk::ConfigError(json_path, "unknown aggregator \"" + name + "\": expected mean, median, trimmed_mean or krum");
}

std::vector<at::Tensor> aggregate(const std::vector<std::vector<at::Tensor>>& by_rank, const AggregatorSpec& spec,
                                  int64_t* chosen) {
  EXOGYM_CHECK_INTERNAL(!by_rank.empty(), "aggregate needs at least one rank");
  const int64_t R = static_cast<int64_t>(by_rank.size());
  const std::vector<at::Tensor>& first = by_rank.front();
  std::vector<at::Tensor> result;
  if (spec.kind == Aggregator::Krum) {
    if (R < spec.byzantine + 3) {
      throw sdk::Error("krum with f = " + std::to_string(spec.byzantine) + " needs at least f + 3 = " +
                       std::to_string(spec.byzantine + 3) + " nodes, got " + std::to_string(R));
    }
    const int64_t pick = krum_choice(by_rank, spec.byzantine);
    if (chosen) *chosen = pick;
    for (const auto& t : by_rank[static_cast<size_t>(pick)]) result.push_back(t.detach().clone());
    return result;
  }
  // trim < 0.5 leaves R - 2t >= 1 values.
  if (spec.kind == Aggregator::TrimmedMean && !(spec.trim >= 0 && spec.trim < 0.5)) {
    throw sdk::Error("trimmed_mean: trim " + std::to_string(spec.trim) + " is outside [0, 0.5)");
  }
  const int64_t t = spec.kind == Aggregator::TrimmedMean ? static_cast<int64_t>(std::floor(spec.trim * R)) : 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const at::Tensor rows = stacked(by_rank, i);
    at::Tensor flat;
    switch (spec.kind) {
      case Aggregator::Mean:
        flat = ordered_mean(rows, 0, R);
        break;
      case Aggregator::Median: {
        const at::Tensor sorted = sorted_rows(rows);
        flat = R % 2 == 1 ? sorted[R / 2].clone() : ordered_mean(sorted, R / 2 - 1, R / 2 + 1);
        break;
      }
      case Aggregator::TrimmedMean:
        flat = ordered_mean(sorted_rows(rows), t, R - t);
        break;
      case Aggregator::Krum:
        break;  // above
    }
    result.push_back(like(flat, first[i]));
  }
  return result;
}

}  // namespace exogym::modules
