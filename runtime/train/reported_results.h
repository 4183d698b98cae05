#pragma once
// What the reporting node reported last, kept by process 0 (reports.h) for
// the progress, the result, summary.json and the target, and saved with
// each checkpoint (checkpointing.h) so that a resumed run goes on from it.
#include <cmath>
#include <optional>

#include "exogym/runtime/train/training_result.h"

namespace exogym::runtime::train {

struct ReportedResults {
  std::optional<EvalRecord> last_eval;
  std::optional<TargetHit> target_hit;
  double last_train_loss = NAN;
};

}  // namespace exogym::runtime::train
