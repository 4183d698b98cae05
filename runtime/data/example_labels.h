#pragma once
// Reading every example's integer label from any dataset, built in or a
// plugin, through Dataset::get(): the label partitions and data.csv need
// them, and a dataset needs no extra code to provide them.
#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/sdk/dataset.h"

namespace exogym::runtime::data {

// Every example's label, when the dataset's batches have a "target" holding
// one integer per example (shape [B]); nullopt otherwise (no "target", a
// sequence target such as text-char's [B, T], or floats). Reads the dataset
// once, in chunks, on the calling thread: a pass of get() over the whole
// set, the price of needing nothing more from a dataset. Throws
// sdk::DataError when a later chunk's target stops being one integer per
// example.
std::optional<std::vector<int64_t>> example_labels(const sdk::Dataset& dataset);

}  // namespace exogym::runtime::data
