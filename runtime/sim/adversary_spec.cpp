#include "exogym/runtime/sim/adversary_spec.h"

namespace exogym::runtime::sim {

const char* to_string(Attack attack) {
  switch (attack) {
    case Attack::SignFlip:
      return "sign_flip";
    case Attack::Noise:
      return "noise";
    case Attack::Constant:
      return "constant";
  }
  return "?";
}

std::vector<std::string> attack_names() { return {"sign_flip", "noise", "constant"}; }

}  // namespace exogym::runtime::sim
