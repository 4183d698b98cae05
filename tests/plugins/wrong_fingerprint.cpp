// Built with another compiler / LibTorch (as far as its fingerprint says):
// the loader must refuse it.
#define EXOGYM_BUILD_FINGERPRINT "gcc-1;cxx11abi=0;torch=0.1"
#include <cstdlib>

#include "exogym/sdk/plugin.h"

namespace {
exogym::sdk::OptionSpecs no_options() { std::abort(); }
}  // namespace

EXOGYM_PLUGIN_COMMON_("strategy", "wrong_fingerprint", "0.0.1", no_options, "")
