// Must not compile: a plugin's include path holds only the SDK and the
// strategy modules, so the runtime's internals are out of its reach. Compiled
// only by tests/repository/plugin_include_rule.py, which expects the compiler
// to stop at the runtime's header, after it found the SDK's.
#include "exogym/sdk/plugin.h"
// The line the compiler must stop at:
#include "exogym/runtime/manifest/manifest.h"
