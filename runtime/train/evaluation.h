#pragma once
// Evaluation on the validation subset: node 0's own model (local) and the
// parameter-averaged model (global), on the same examples.
#include <cstdint>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/run_state.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::train {

// A collective: every node calls it at the same step. Every node averages
// its parameters into the global model; node 0 evaluates its own model and
// node 1 the averaged one, and node 0 records both (validation.csv, the
// progress line, the target loss).
void evaluate(RunState& s, int rank, sdk::Model& model, sdk::Communicator& comm, int64_t step);

}  // namespace exogym::runtime::train
