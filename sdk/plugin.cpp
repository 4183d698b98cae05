#include "exogym/sdk/plugin_abi.h"

namespace exogym::sdk {

// Compiled into the SDK library, so it reports how the runtime was built; a
// plugin's info record carries the same macro expanded in the plugin's build.
const char* runtime_fingerprint() { return EXOGYM_BUILD_FINGERPRINT; }

}  // namespace exogym::sdk
