// A plugin whose static constructor leaves a marker file at
// $EXOGYM_TEST_MARKER: the loader must not run it for --list-plugins, for a
// misspelt plugin name, or for a plugin it refuses. Built twice, as
// "marker" and, for a future ABI, as "marker_wrong_abi" (tests/plugins/
// CMakeLists.txt).
#include <cstdlib>
#include <fstream>

#include "exogym/sdk/plugin.h"

#ifndef MARKER_NAME
#define MARKER_NAME marker
#endif

namespace {

struct LeavesMarker {
  LeavesMarker() {
    if (const char* file = std::getenv("EXOGYM_TEST_MARKER")) std::ofstream(file) << EXOGYM_STRINGIFY(MARKER_NAME);
  }
} leaves_marker;

exogym::sdk::OptionSpecs no_options() { return {}; }

}  // namespace

// Only the record and the options: nothing creates this strategy.
EXOGYM_PLUGIN_COMMON_("strategy", EXOGYM_STRINGIFY(MARKER_NAME), "0.0.1", no_options, "")
