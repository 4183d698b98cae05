#pragma once
// Evaluation on the validation subset: the reporting node's own model
// (local) and the parameter-averaged model (global), on the same examples.
#include <cstdint>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/training_state.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::train {

// A collective: every live node calls it at the same step. Every node
// averages its parameters into the global model; the reporting node (node
// 0, or the lowest live node) evaluates its own model and the next live
// node the averaged one, and the reporting node reports both (reports.h).
void evaluate(TrainingState& s, int rank, sdk::Model& model, sdk::Communicator& comm, int64_t step);

}  // namespace exogym::runtime::train
