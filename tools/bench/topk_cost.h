#pragma once
// What chunk-wise top-k's selection costs (docs/compression.md#chunk-wise-top-k):
// select_topk, the one top-k of the modules library (SparseLoCo's and
// DeMo's), against a selection by std::nth_element, the one it replaced.
#include <nlohmann/json.hpp>

#include "bench/options.h"

namespace exogym::bench {

// On one thread, over 4M random normal values (64K with --quick) cut into
// chunks, for chunks of 64 and 4096 at densities 3 % and 25 %: the fastest
// of 5 passes of each selection, after checking they select the same
// offsets. Prints its table; returns its rows.
nlohmann::json topk_section(const BenchOptions& options);

}  // namespace exogym::bench
