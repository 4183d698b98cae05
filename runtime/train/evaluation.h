#pragma once
// Evaluation on the validation subset: the reporting node's own model
// (local) and the parameter-averaged model (global), on the same examples.
#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/runtime/train/training_result.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::manifest {
struct Manifest;
}
namespace exogym::runtime::sim {
class NodeMeter;
}

namespace exogym::runtime::train {

struct TrainingSetup;

// A collective: every live node (`live`, ascending) calls it at the same
// step. Every node averages its parameters into the global model; the
// reporting node (the lowest live node) evaluates its own model and the next
// live node the averaged one. Returns both to the reporting node, with the
// bytes and clock of its `meter`, for it to report (reports.h); nothing to
// the others.
std::optional<EvalRecord> evaluate(const manifest::Manifest& m, const TrainingSetup& setup,
                                   const std::vector<int>& live, const sim::NodeMeter& meter, int rank,
                                   sdk::Model& model, sdk::Communicator& comm, int64_t step);

}  // namespace exogym::runtime::train
