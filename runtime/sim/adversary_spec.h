#pragma once
// Nodes that send corrupted values on a schedule (the manifest's
// "adversaries"), so that robust aggregation can be studied
// (docs/simulation.md#corrupted-senders); adversarial_communicator.h does it.
// The strategy of such a node runs as usual; what it contributes to a collective through its communicator is
// corrupted on the way out, during the steps of its entries:
//   sign_flip  each value x becomes -scale * x
//   noise      x + scale * N(0, 1), drawn from the run's seed, the node, the
//              step and the call's place in the step: reproducible
//   constant   every value becomes scale
// Only floating-point tensors are touched: indices and packed low-bit codes
// travel as they were (their scales, fp32, are corrupted). What the node
// receives, and its own state, are not: a Byzantine sender whose local
// training stays honest. The runtime's own collectives (checkpoints,
// recovery) are not corrupted.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::sim {

enum class Attack { SignFlip, Noise, Constant };

// "sign_flip", "noise", "constant".
const char* to_string(Attack attack);
std::vector<std::string> attack_names();

// One entry of "adversaries".
struct AdversarySpec {
  int node = 0;
  Attack attack = Attack::SignFlip;
  double scale = 1.0;
  int64_t from_step = 0;              // the first step it corrupts
  std::optional<int64_t> until_step;  // the first step it no longer does (none: to the end)
  std::string path;                   // "adversaries[1]", for messages

  bool active(int64_t step) const { return step >= from_step && (!until_step || step < *until_step); }
};

}  // namespace exogym::runtime::sim
