#pragma once
// Mixed precision (the manifest's "precision": "bf16"): while a scope is
// open, the calling thread's forward passes run under LibTorch's autocast, so
// matrix products compute in bfloat16 while the weights, their gradients, the
// optimizer state and everything the strategies send stay fp32. Autocast is
// thread-local state, so each node thread opens its own scope around its
// forward pass (the backward pass follows the types the forward pass chose).
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::train {

// Whether autocast is on for `device` on the calling thread (any LibTorch).
bool autocast_enabled(c10::DeviceType device);

class AutocastScope {
 public:
  // Does nothing for Precision::Fp32.
  AutocastScope(manifest::Precision precision, c10::DeviceType device);
  // Restores the thread's previous autocast state; the outermost scope also
  // drops autocast's cache of cast weights, which the next optimizer step
  // makes stale.
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace exogym::runtime::train
