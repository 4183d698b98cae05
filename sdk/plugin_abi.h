#pragma once
// What the loader checks before it runs any of a plugin library: the record the export macros (plugin.h)
// put in section .exogym_plugin, plain "key=value" lines (abi, kind, name, version, fingerprint;
// per_node=1 for a per-node dataset), read from the file without loading it. A library of another ABI
// version or build fingerprint is refused, naming the file and both; only then is it loaded and its
// exports called (Boost.DLL aliases exogym_plugin_options and exogym_create_<kind>).
#include "exogym/sdk/plugin.h"

namespace exogym::sdk {

class Model;
class Strategy;
class Dataset;
struct DatasetRequest;

// The runtime's own, to compare a plugin's against.
inline int runtime_abi_version() { return EXOGYM_ABI_VERSION; }
const char* runtime_fingerprint();

using ModelFactory = Model* (*)(const nlohmann::json& options);
using StrategyFactory = Strategy* (*)(const nlohmann::json& options);
using DatasetFactory = Dataset* (*)(const nlohmann::json& options, const DatasetRequest& request);
using OptionsFunction = OptionSpecs (*)();

}  // namespace exogym::sdk
