#include "exogym/runtime/output/report/seed_groups.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "exogym/runtime/util/mean_std.h"

namespace exogym::runtime::output::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What must be equal for runs to be seeds of one variant.
json identity(const FinishedRun& run) {
  json config = run.config;
  config.erase("seed");
  config.erase("runtime");
  if (config.contains("output") && config["output"].is_object()) config["output"].erase("dir");
  return {{"label", run.label}, {"config", config}};
}

std::optional<uint64_t> seed_of(const FinishedRun& run) {
  const json seed = run.config.value("seed", json());
  if (!seed.is_number_unsigned()) return std::nullopt;
  return seed.get<uint64_t>();
}

void merge_columns(const std::vector<const NumericTable*>& tables, NumericTable& out) {
  size_t rows = tables.front()->rows();
  for (const auto* t : tables) rows = std::min(rows, t->rows());
  for (const auto& name : tables.front()->header) {
    const bool everywhere =
        std::all_of(tables.begin(), tables.end(), [&](const NumericTable* t) { return t->has(name); });
    if (!everywhere) continue;
    out.header.push_back(name);
    auto& mean = out.columns[name];
    auto& spread = out.spread[name];
    for (size_t i = 0; i < rows; ++i) {
      std::vector<double> values;
      for (const auto* t : tables) values.push_back(t->at(name)[i]);
      const util::MeanStd s = util::mean_std(values);
      mean.push_back(s.mean);
      spread.push_back(s.std);
    }
  }
}

void merge_metrics(const std::vector<const FinishedRun*>& seeds, FinishedRun& out) {
  for (const auto& [name, first] : seeds.front()->metrics) {
    size_t rows = first.step.size();
    bool everywhere = true;
    for (const auto* run : seeds) {
      const auto it = run->metrics.find(name);
      everywhere = everywhere && it != run->metrics.end();
      if (it != run->metrics.end()) rows = std::min(rows, it->second.step.size());
    }
    if (!everywhere) continue;
    MetricSeries& series = out.metrics[name];
    for (size_t i = 0; i < rows; ++i) {
      std::vector<double> steps, values;
      for (const auto* run : seeds) {
        steps.push_back(run->metrics.at(name).step[i]);
        values.push_back(run->metrics.at(name).value[i]);
      }
      const util::MeanStd s = util::mean_std(values);
      series.step.push_back(util::mean_std(steps).mean);
      series.value.push_back(s.mean);
      series.spread.push_back(s.std);
    }
  }
}

// The documents' mean (or standard deviation) at every place where each has
// a number; elsewhere the first's value (or nothing).
json merge_json(const std::vector<const json*>& docs, bool deviation) {
  const json& first = *docs.front();
  const auto all = [&](auto test) { return std::all_of(docs.begin(), docs.end(), test); };
  if (first.is_number() && all([](const json* d) { return d->is_number(); })) {
    std::vector<double> values;
    for (const auto* d : docs) values.push_back(d->get<double>());
    const util::MeanStd s = util::mean_std(values);
    return deviation ? json(s.std) : json(s.mean);
  }
  if (first.is_object()) {
    json out = json::object();
    for (const auto& item : first.items()) {
      if (!all([&](const json* d) { return d->is_object() && d->contains(item.key()); })) continue;
      std::vector<const json*> children;
      for (const auto* d : docs) children.push_back(&d->at(item.key()));
      json merged = merge_json(children, deviation);
      if (!merged.is_null()) out[item.key()] = std::move(merged);
    }
    return out;
  }
  if (first.is_array() && all([&](const json* d) { return d->is_array() && d->size() == first.size(); })) {
    json out = json::array();
    for (size_t i = 0; i < first.size(); ++i) {
      std::vector<const json*> children;
      for (const auto* d : docs) children.push_back(&d->at(i));
      out.push_back(merge_json(children, deviation));
    }
    return out;
  }
  return deviation ? json() : first;
}

FinishedRun merge(const std::vector<const FinishedRun*>& seeds) {
  const FinishedRun& first = *seeds.front();
  FinishedRun out;
  out.label = first.label;
  // seed-N folders of one variant: the variant's folder.
  const fs::path parent = folder_path(first.dir).parent_path();
  const bool siblings = std::all_of(seeds.begin(), seeds.end(),
                                    [&](const FinishedRun* r) { return folder_path(r->dir).parent_path() == parent; });
  out.dir = siblings && parent.filename() == first.label ? parent : first.dir;
  out.config = first.config;
  out.config.erase("seed");
  for (const auto* run : seeds) out.seeds.push_back(*seed_of(*run));
  out.config["seeds"] = out.seeds;
  std::vector<const NumericTable*> train, validation;
  for (const auto* run : seeds) {
    train.push_back(&run->train);
    validation.push_back(&run->validation);
  }
  merge_columns(train, out.train);
  merge_columns(validation, out.validation);
  merge_metrics(seeds, out);
  if (std::all_of(seeds.begin(), seeds.end(), [](const FinishedRun* r) { return r->finished(); })) {
    std::vector<const json*> summaries;
    for (const auto* run : seeds) summaries.push_back(&*run->summary);
    out.summary = merge_json(summaries, false);
    out.summary_spread = merge_json(summaries, true);
  }
  return out;
}

}  // namespace

std::vector<FinishedRun> merge_seeds(std::vector<FinishedRun> runs) {
  std::vector<std::vector<size_t>> groups;  // indices into runs, in first-seen order
  std::vector<json> identities;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto seed = seed_of(runs[i]);
    json id = identity(runs[i]);
    if (!seed) id["alone"] = i;  // a run without a seed merges with none
    auto group = groups.end();
    for (size_t g = 0; g < groups.size() && group == groups.end(); ++g) {
      const bool seed_taken =
          std::any_of(groups[g].begin(), groups[g].end(), [&](size_t j) { return seed_of(runs[j]) == seed; });
      if (identities[g] == id && !seed_taken) group = groups.begin() + static_cast<long>(g);
    }
    if (group != groups.end()) {
      group->push_back(i);
    } else {
      groups.push_back({i});
      identities.push_back(std::move(id));
    }
  }
  std::vector<FinishedRun> merged;
  for (const auto& group : groups) {
    if (group.size() == 1) {
      merged.push_back(std::move(runs[group.front()]));
      continue;
    }
    std::vector<const FinishedRun*> seeds;
    for (size_t i : group) seeds.push_back(&runs[i]);
    merged.push_back(merge(seeds));
  }
  return merged;
}

}  // namespace exogym::runtime::output::report
