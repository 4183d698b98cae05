// Must not compile: a plugin's include path holds only the SDK and the
// strategy modules, so the runtime's internals and the SDK library's own
// details are out of its reach. Compiled only by tests/repository/plugin_include_rule.py,
// once for each such header (it defines EXOGYM_OUT_OF_REACH), which expects
// the compiler to stop at that header, after it found the SDK's.
#include "exogym/sdk/plugin.h"
#ifndef EXOGYM_OUT_OF_REACH
#define EXOGYM_OUT_OF_REACH "exogym/runtime/manifest/manifest.h"
#endif
// The line the compiler must stop at:
#include EXOGYM_OUT_OF_REACH
