#pragma once
// `exogym-run --list-plugins`: every plugin the loader can find (and the
// built-in datasets), with kind, name, version, file and options, as text.
#include <string>

namespace exogym::runtime::plugin {

class PluginLoader;

// The catalog of the built-in datasets and of every plugin on `loader`'s
// search path; a library that cannot be used is listed with the reason.
std::string plugin_catalog(PluginLoader& loader);

}  // namespace exogym::runtime::plugin
