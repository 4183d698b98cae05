#pragma once
// Exporting a plugin: one macro per library, at global scope, e.g.
//   EXOGYM_STRATEGY_PLUGIN("diloco", "1.0.0", DiLoCo, diloco_options)
// where DiLoCo's constructor takes the validated `const nlohmann::json& options`, defaults filled in, and
// diloco_options returns the OptionSpecs (options.h). Likewise EXOGYM_MODEL_PLUGIN, EXOGYM_DATASET_PLUGIN (its class
// takes (options, const DatasetRequest&)) and EXOGYM_NODE_DATASET_PLUGIN (one per node); composed strategies:
// compose.h's. Libraries of another ABI or build are refused unrun (plugin_abi.h).
#include <torch/version.h>

#include <boost/dll/alias.hpp>

#include "exogym/sdk/options.h"

// The plugin ABI version, also libexogym_sdk's and libexogym_modules' SOVERSION. Bumped whenever what a plugin binary
// depends on changes (in sdk/*.h or exogym/modules): the layout or virtual functions of a type that crosses the plugin
// boundary, or a function plugins call removed or its signature changed.
// A test build may override it to check refusal.
#ifndef EXOGYM_ABI_VERSION
#define EXOGYM_ABI_VERSION 19
#endif

// What must match for C++ objects to cross the boundary: the compiler, the libstdc++ string ABI, LibTorch.
#define EXOGYM_STRINGIFY_IMPL(x) #x
#define EXOGYM_STRINGIFY(x) EXOGYM_STRINGIFY_IMPL(x)
#ifdef __clang__
#define EXOGYM_COMPILER_ID "clang-" EXOGYM_STRINGIFY(__clang_major__)
#else
#define EXOGYM_COMPILER_ID "gcc-" EXOGYM_STRINGIFY(__GNUC__)
#endif
#ifndef EXOGYM_BUILD_FINGERPRINT
#define EXOGYM_BUILD_FINGERPRINT                                                                       \
  EXOGYM_COMPILER_ID ";cxx11abi=" EXOGYM_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) ";torch=" EXOGYM_STRINGIFY( \
      TORCH_VERSION_MAJOR) "." EXOGYM_STRINGIFY(TORCH_VERSION_MINOR)
#endif

// The record is data in a section of its own, read without running anything (kind, name and version are string
// literals); `retain` keeps it from --gc-sections. `record_extra`: more "key=value\n" lines.
#if __has_attribute(retain)
#define EXOGYM_RETAIN_ __attribute__((retain))
#else
#define EXOGYM_RETAIN_
#endif
#define EXOGYM_PLUGIN_COMMON_(kind, name, version, options_fn, record_extra)                                   \
  namespace exogym_plugin_exports {                                                                            \
  __attribute__((used, section(".exogym_plugin"))) EXOGYM_RETAIN_ const char exogym_plugin_record[] =          \
      "abi=" EXOGYM_STRINGIFY(EXOGYM_ABI_VERSION) "\nkind=" kind "\nname=" name "\nversion=" version           \
                                                  "\nfingerprint=" EXOGYM_BUILD_FINGERPRINT "\n" record_extra; \
  ::exogym::sdk::OptionSpecs exogym_options() { return options_fn(); }                                         \
  }                                                                                                            \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_options, exogym_plugin_options)
// A plugin whose factory, exported as `factory`, makes a `Base` from (params) as Class(args).
#define EXOGYM_PLUGIN_(kind, name, version, Class, options_fn, record_extra, Base, factory, params, args) \
  EXOGYM_PLUGIN_COMMON_(kind, name, version, options_fn, record_extra)                                    \
  namespace exogym_plugin_exports {                                                                       \
  ::exogym::sdk::Base* exogym_create params { return new Class args; }                                    \
  }                                                                                                       \
  BOOST_DLL_ALIAS(exogym_plugin_exports::exogym_create, factory)

#define EXOGYM_STRATEGY_PLUGIN(name, version, Class, options_fn)                                     \
  EXOGYM_PLUGIN_("strategy", name, version, Class, options_fn, "", Strategy, exogym_create_strategy, \
                 (const nlohmann::json& o), (o))
#define EXOGYM_MODEL_PLUGIN(name, version, Class, options_fn)                                                          \
  EXOGYM_PLUGIN_("model", name, version, Class, options_fn, "", Model, exogym_create_model, (const nlohmann::json& o), \
                 (o))
#define EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, extra)                              \
  EXOGYM_PLUGIN_("dataset", name, version, Class, options_fn, extra, Dataset, exogym_create_dataset, \
                 (const nlohmann::json& o, const ::exogym::sdk::DatasetRequest& r), (o, r))
#define EXOGYM_DATASET_PLUGIN(name, version, Class, options_fn) \
  EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, "")
#define EXOGYM_NODE_DATASET_PLUGIN(name, version, Class, options_fn) \
  EXOGYM_DATASET_PLUGIN_(name, version, Class, options_fn, "per_node=1\n")
