// Built as if against a future SDK: the loader must refuse it before calling
// anything but its info function.
#define EXOGYM_ABI_VERSION 999
#include <cstdlib>

#include "exogym/sdk/plugin.h"

namespace {
exogym::sdk::OptionSpecs no_options() {
  std::abort();  // must never run: the ABI check comes first
}
struct NeverBuilt {
  explicit NeverBuilt(const nlohmann::json&) { std::abort(); }
};
}  // namespace

// Only the info and options symbols are exported; that is all the check reads.
EXOGYM_PLUGIN_COMMON_("strategy", "wrong_abi", "0.0.1", no_options)
