#include "exogym/sdk/classifier.h"

#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>

#include "exogym/sdk/error.h"
#include "exogym/sdk/stacked.h"

namespace exogym::sdk {

namespace {

at::Tensor class_indices(const Batch& batch) { return batch_tensor(batch, "target").to(at::kLong); }

}  // namespace

at::Tensor Classifier::loss(const Batch& batch) {
  const at::Tensor scores = logits(batch);
  return at::cross_entropy_loss(scores, class_indices(batch));
}

at::Tensor Classifier::stacked_logits(const Stack& /*stack*/, const Batch& /*batch*/) {
  throw Error("this classifier does not compute stacked logits (it does not implement stacked_logits)");
}

at::Tensor Classifier::stacked_loss(const Stack& stack, const Batch& batch) {
  return stacked_cross_entropy(stacked_logits(stack, batch), batch_tensor(batch, "target"));
}

EvalOutput Classifier::evaluate(const Batch& batch) {
  const at::Tensor scores = logits(batch);
  const at::Tensor target = class_indices(batch);
  EvalOutput out;
  out.loss = at::cross_entropy_loss(scores, target);
  out.metrics["accuracy"] = at::argmax(scores, 1).eq(target).to(at::kFloat).mean();
  return out;
}

std::vector<std::string> Classifier::metric_names() const { return {"accuracy"}; }

}  // namespace exogym::sdk
