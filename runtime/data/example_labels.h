#pragma once
// Reading every example's integer label from any dataset, built in or a
// plugin, through Dataset::get(): the label partitions and data.csv need
// them, and a dataset needs no extra code to provide them.
#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/sdk/dataset.h"

namespace exogym::runtime::data {

// Implemented by built-in datasets that hold their labels, so that reading
// them costs no pass of get() over every example (for MNIST that pass would
// normalize 47 M pixels only to drop them).
class KnownLabels {
 public:
  virtual ~KnownLabels() = default;
  // One label per example, in example order; nullopt when the dataset has
  // none (example_labels' nullopt).
  virtual std::optional<std::vector<int64_t>> all_labels() const = 0;
};

// Every example's label: from KnownLabels when the dataset implements it,
// else when the dataset's batches have a "target" holding one integer per
// example (shape [B]); nullopt otherwise (no "target", a sequence target
// such as text-char's [B, T], or floats). Without KnownLabels it reads the
// dataset once, in chunks, on the calling thread: a pass of get() over the
// whole set, the price of needing nothing more from a dataset. Throws
// sdk::DataError when a later chunk's target stops being one integer per
// example.
std::optional<std::vector<int64_t>> example_labels(const sdk::Dataset& dataset);

}  // namespace exogym::runtime::data
