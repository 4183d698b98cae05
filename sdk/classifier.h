#pragma once
// A classification model: the model computes logits, the base scores them.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "exogym/sdk/model.h"

namespace exogym::sdk {

// Scores logits [N, C] against the batch's "target" [N] of class indices
// (any integer or floating dtype holding whole numbers; stacked: logits
// [K, N, C] against [K, N]): the loss is the
// mean cross-entropy, and evaluate() also reports "accuracy", the fraction
// of examples whose largest logit is the target's.
class Classifier : public Model {
 public:
  // The logits [N, C] of the batch's N examples. Called by loss() and
  // evaluate(), so it runs in training and in evaluation mode (see Model).
  virtual at::Tensor logits(const Batch& batch) = 0;

  // Stacked execution (sdk/stacked.h): the logits [K, N, C] of the K
  // nodes' stacked batches. A classifier that implements it also overrides
  // supports_stacking(). Optional: the default throws.
  virtual at::Tensor stacked_logits(const Stack& stack, const Batch& batch);

  at::Tensor loss(const Batch& batch) override;
  at::Tensor stacked_loss(const Stack& stack, const Batch& batch) override;
  EvalOutput evaluate(const Batch& batch) override;
  std::vector<std::string> metric_names() const override;
};

}  // namespace exogym::sdk
