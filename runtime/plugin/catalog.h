#pragma once
// `exogym-run --list-plugins`: every plugin the loader can find (and the
// built-in datasets), with kind, name, version, file and options, as text.
#include <string>
#include <vector>

#include "exogym/runtime/manifest/json_schema.h"

namespace exogym::runtime::plugin {

class PluginLoader;

// The catalog of the built-in datasets and of every plugin on `loader`'s
// search path; a library that cannot be used is listed with the reason.
std::string plugin_catalog(PluginLoader& loader);

// The built-in datasets and every usable plugin on `loader`'s search path,
// with their options, for `exogym-run --schema`. A library that cannot be
// used is left out with a warning naming it.
std::vector<manifest::PluginOptions> plugin_options(PluginLoader& loader);

}  // namespace exogym::runtime::plugin
