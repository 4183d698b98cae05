#pragma once
// Exporting a plugin. A plugin .so exports, through Boost.DLL aliases:
//   exogym_plugin_info     -> const PluginInfo*   (plain C data, read first)
//   exogym_plugin_options  -> OptionSpecs         (the options it accepts)
//   exogym_create_<kind>   -> a factory taking the validated options
// The loader reads the info and refuses the library, naming the file and both
// versions, unless its ABI version and build fingerprint match the runtime's;
// only then does it call any other code in the plugin.
//
// One macro exports a plugin:
//   EXOGYM_MODEL_PLUGIN("mlp", "1.0.0", MlpModel, mlp_options)
// where MlpModel has a constructor taking `const nlohmann::json& options`
// (already validated against mlp_options(), defaults filled in) and
// mlp_options is a function returning exogym::sdk::OptionSpecs. Likewise
// EXOGYM_STRATEGY_PLUGIN, and EXOGYM_DATASET_PLUGIN whose class constructor
// takes (const nlohmann::json& options, const exogym::sdk::DatasetRequest&).
#include <torch/version.h>

#include <boost/dll/alias.hpp>

#include "exogym/sdk/options.h"

// Bumped whenever a type crossing the plugin boundary changes layout or
// virtual functions (sdk/*.h). A test build may override it to check refusal.
#ifndef EXOGYM_ABI_VERSION
#define EXOGYM_ABI_VERSION 5
#endif

#define EXOGYM_STRINGIFY_IMPL(x) #x
#define EXOGYM_STRINGIFY(x) EXOGYM_STRINGIFY_IMPL(x)

#if defined(__clang__)
#define EXOGYM_COMPILER_ID "clang-" EXOGYM_STRINGIFY(__clang_major__)
#elif defined(__GNUC__)
#define EXOGYM_COMPILER_ID "gcc-" EXOGYM_STRINGIFY(__GNUC__)
#else
#define EXOGYM_COMPILER_ID "unknown-compiler"
#endif

// What must match for C++ objects to cross the boundary safely: the
// compiler's ABI, the libstdc++ string ABI and the LibTorch version.
#ifndef EXOGYM_BUILD_FINGERPRINT
#define EXOGYM_BUILD_FINGERPRINT                                                                       \
  EXOGYM_COMPILER_ID ";cxx11abi=" EXOGYM_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) ";torch=" EXOGYM_STRINGIFY( \
      TORCH_VERSION_MAJOR) "." EXOGYM_STRINGIFY(TORCH_VERSION_MINOR)
#endif

namespace exogym::sdk {

class Model;
class Strategy;
class Dataset;
struct DatasetRequest;

// Plain C data so that it can be read before anything else is trusted.
struct PluginInfo {
  int abi_version;
  const char* kind;  // "model", "strategy" or "dataset"
  const char* name;
  const char* version;
  const char* fingerprint;
};

// The runtime's own values, to compare a plugin's against.
inline int runtime_abi_version() { return EXOGYM_ABI_VERSION; }
const char* runtime_fingerprint();

using ModelFactory = Model* (*)(const nlohmann::json& options);
using StrategyFactory = Strategy* (*)(const nlohmann::json& options);
using DatasetFactory = Dataset* (*)(const nlohmann::json& options, const DatasetRequest& request);
using OptionsFunction = OptionSpecs (*)();

}  // namespace exogym::sdk

#define EXOGYM_PLUGIN_COMMON_(kind, name, version, options_fn)                                                      \
  namespace exogym_plugin_exports {                                                                                 \
  const ::exogym::sdk::PluginInfo* exogym_info() {                                                                  \
    static const ::exogym::sdk::PluginInfo info{EXOGYM_ABI_VERSION, kind, name, version, EXOGYM_BUILD_FINGERPRINT}; \
    return &info;                                                                                                   \
  }                                                                                                                 \
  ::exogym::sdk::OptionSpecs exogym_options() { return options_fn(); }                                              \
  }                                                                                                                 \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_info, exogym_plugin_info)                                           \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_options, exogym_plugin_options)

#define EXOGYM_MODEL_PLUGIN(name, version, Class, options_fn)                                       \
  EXOGYM_PLUGIN_COMMON_("model", name, version, options_fn)                                         \
  namespace exogym_plugin_exports {                                                                 \
  ::exogym::sdk::Model* exogym_create(const nlohmann::json& options) { return new Class(options); } \
  }                                                                                                 \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_model)

#define EXOGYM_STRATEGY_PLUGIN(name, version, Class, options_fn)                                       \
  EXOGYM_PLUGIN_COMMON_("strategy", name, version, options_fn)                                         \
  namespace exogym_plugin_exports {                                                                    \
  ::exogym::sdk::Strategy* exogym_create(const nlohmann::json& options) { return new Class(options); } \
  }                                                                                                    \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_strategy)

#define EXOGYM_DATASET_PLUGIN(name, version, Class, options_fn)                                                        \
  EXOGYM_PLUGIN_COMMON_("dataset", name, version, options_fn)                                                          \
  namespace exogym_plugin_exports {                                                                                    \
  ::exogym::sdk::Dataset* exogym_create(const nlohmann::json& options, const ::exogym::sdk::DatasetRequest& request) { \
    return new Class(options, request);                                                                                \
  }                                                                                                                    \
  }                                                                                                                    \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_dataset)
