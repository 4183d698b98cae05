#pragma once
// `exogym-run --list-plugins`: every plugin the loader can find (and the
// built-in datasets), with kind, name, version and file, as text.
#include <string>

namespace exogym::runtime::plugin {

class PluginLoader;

// The catalog of the built-in datasets (with their options) and of every
// plugin on `loader`'s search path, described from the records in the files;
// a library that cannot be used is listed with the reason. No plugin code
// runs unless `with_options`: then each usable plugin is loaded (its static
// constructors run) to list its options too.
std::string plugin_catalog(PluginLoader& loader, bool with_options);

}  // namespace exogym::runtime::plugin
