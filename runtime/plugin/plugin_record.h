#pragma once
// A plugin's record (sdk/plugin.h), read from the library file without
// loading it: no code of the plugin runs, not even its static constructors,
// until the loader has checked the record against the runtime.
#include <filesystem>
#include <string>

namespace exogym::runtime::plugin {

struct PluginDescription {
  std::filesystem::path file;
  int abi_version = 0;
  std::string kind, name, version, fingerprint;
  // A dataset exported with EXOGYM_NODE_DATASET_PLUGIN: built once per node.
  bool per_node = false;
};

// Reads `file`'s .exogym_plugin section (a 64-bit little-endian ELF shared
// library). Refuses, before opening it, anything that is not a regular file
// (a FIFO would block, /dev/zero never end). Throws sdk::PluginError naming
// the file: not a regular file, not a shared library, no record (not an
// ExoGym plugin, or one built for an SDK before ABI 5), a malformed record.
PluginDescription read_plugin_record(const std::filesystem::path& file);

}  // namespace exogym::runtime::plugin
