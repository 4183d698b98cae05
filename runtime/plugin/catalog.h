#pragma once
// `exogym-run --list-plugins`: every plugin the loader can find (and the
// built-in datasets), with kind, name, version and file, as text.
#include <string>
#include <vector>

#include "exogym/runtime/manifest/json_schema.h"

namespace exogym::runtime::plugin {

class PluginLoader;

// The catalog of the built-in datasets (with their options) and of every
// plugin on `loader`'s search path, described from the records in the files;
// a library that cannot be used is listed with the reason. No plugin code
// runs unless `with_options`: then each usable plugin is loaded (its static
// constructors run) to list its options too.
std::string plugin_catalog(PluginLoader& loader, bool with_options);

// The built-in datasets and every usable plugin on `loader`'s search path,
// with their options, for `exogym-run --schema`: each usable plugin is
// loaded (its static constructors run) to read its options. A library that
// cannot be used is left out with a warning naming it.
std::vector<manifest::PluginOptions> plugin_options(PluginLoader& loader);

}  // namespace exogym::runtime::plugin
