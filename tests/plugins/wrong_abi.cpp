// Built as if against a future SDK: the loader must refuse it from its
// record, without loading it.
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

// Only the record and the options are exported; the check reads only the record.
EXOGYM_PLUGIN_COMMON_("strategy", "wrong_abi", "0.0.1", no_options, "")
