#pragma once
// What the export macros (plugin.h) put in a plugin library, and what the
// loader checks before it runs any of it. A plugin .so holds:
//   section .exogym_plugin -> its record: plain text, "key=value" lines
//                             (abi, kind, name, version, fingerprint;
//                             per_node=1 for a per-node dataset)
// and exports, through Boost.DLL aliases:
//   exogym_plugin_options  -> OptionSpecs         (the options it accepts)
//   exogym_create_<kind>   -> a factory taking the validated options
// The loader reads the record from the file, without loading the library,
// and refuses the library, naming the file and both versions, unless its ABI
// version and build fingerprint match the runtime's; only then does it load
// the library (which runs its static constructors) and call its code.
#include <torch/version.h>

#include <boost/dll/alias.hpp>

#include "exogym/sdk/options.h"

// The plugin ABI version, also the SOVERSION of libexogym_sdk and
// libexogym_modules. Bumped whenever what a plugin binary depends on
// changes: the layout or virtual functions of a type that crosses the
// plugin boundary, or a function of those libraries that plugins call
// (removed, or its signature or return type changed), in sdk/*.h or
// exogym/modules. A test build may override it to check refusal.
#ifndef EXOGYM_ABI_VERSION
#define EXOGYM_ABI_VERSION 18
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

// The runtime's own values, to compare a plugin's against.
inline int runtime_abi_version() { return EXOGYM_ABI_VERSION; }
const char* runtime_fingerprint();

using ModelFactory = Model* (*)(const nlohmann::json& options);
using StrategyFactory = Strategy* (*)(const nlohmann::json& options);
using DatasetFactory = Dataset* (*)(const nlohmann::json& options, const DatasetRequest& request);
using OptionsFunction = OptionSpecs (*)();

}  // namespace exogym::sdk

// The record is data in a section of its own, so that the loader reads it
// from the file without running anything (kind, name and version must be
// string literals). `retain` keeps it from a linker's --gc-sections.
#if defined(__has_attribute)
#if __has_attribute(retain)
#define EXOGYM_RETAIN_ __attribute__((retain))
#endif
#endif
#ifndef EXOGYM_RETAIN_
#define EXOGYM_RETAIN_
#endif

// `record_extra`: more "key=value\n" lines of the record ("" for none).
#define EXOGYM_PLUGIN_COMMON_(kind, name, version, options_fn, record_extra)                                   \
  namespace exogym_plugin_exports {                                                                            \
  __attribute__((used, section(".exogym_plugin"))) EXOGYM_RETAIN_ const char exogym_plugin_record[] =          \
      "abi=" EXOGYM_STRINGIFY(EXOGYM_ABI_VERSION) "\nkind=" kind "\nname=" name "\nversion=" version           \
                                                  "\nfingerprint=" EXOGYM_BUILD_FINGERPRINT "\n" record_extra; \
  ::exogym::sdk::OptionSpecs exogym_options() { return options_fn(); }                                         \
  }                                                                                                            \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_options, exogym_plugin_options)

#define EXOGYM_MODEL_PLUGIN(name, version, Class, options_fn)                                       \
  EXOGYM_PLUGIN_COMMON_("model", name, version, options_fn, "")                                     \
  namespace exogym_plugin_exports {                                                                 \
  ::exogym::sdk::Model* exogym_create(const nlohmann::json& options) { return new Class(options); } \
  }                                                                                                 \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_model)

#define EXOGYM_STRATEGY_PLUGIN(name, version, Class, options_fn)                                       \
  EXOGYM_PLUGIN_COMMON_("strategy", name, version, options_fn, "")                                     \
  namespace exogym_plugin_exports {                                                                    \
  ::exogym::sdk::Strategy* exogym_create(const nlohmann::json& options) { return new Class(options); } \
  }                                                                                                    \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_strategy)

#define EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, record_extra)                                         \
  EXOGYM_PLUGIN_COMMON_("dataset", name, version, options_fn, record_extra)                                            \
  namespace exogym_plugin_exports {                                                                                    \
  ::exogym::sdk::Dataset* exogym_create(const nlohmann::json& options, const ::exogym::sdk::DatasetRequest& request) { \
    return new Class(options, request);                                                                                \
  }                                                                                                                    \
  }                                                                                                                    \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, exogym_create_dataset)

#define EXOGYM_DATASET_PLUGIN(name, version, Class, options_fn) \
  EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, "")

#define EXOGYM_NODE_DATASET_PLUGIN(name, version, Class, options_fn) \
  EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, "per_node=1\n")
