#include "exogym/runtime/plugin/catalog.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::plugin {

namespace {

template <class... Args>
std::string format(const char* pattern, Args... args) {
  char line[1024];
  std::snprintf(line, sizeof line, pattern, args...);
  return line;
}

std::string option_lines(const sdk::OptionSpecs& options) {
  std::string out;
  for (const auto& o : options) {
    const std::string fallback = o.required ? "required" : "default " + o.default_value.dump();
    out += format("    %-20s %-26s %s\n", o.name.c_str(), sdk::to_string(o.type), fallback.c_str());
    std::string doc = o.doc;
    if (!o.choices.empty()) {
      doc += doc.empty() ? "one of:" : " (one of:";
      for (const auto& c : o.choices) doc += " " + c;
      if (!o.doc.empty()) doc += ")";
    }
    if (!doc.empty()) out += format("    %-20s %s\n", "", doc.c_str());
  }
  return out;
}

// Loads a plugin discover() found usable (its code runs); on failure, sets
// `error` and returns null. `error` is discover()'s, if any.
std::shared_ptr<LoadedPlugin> load_found(PluginLoader& loader, const PluginLoader::Found& f, std::string& error) {
  if (!error.empty()) return nullptr;
  try {
    return loader.load_file(f.file);
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

}  // namespace

std::string plugin_catalog(PluginLoader& loader, bool with_options) {
  std::string out;
  for (const auto& name : data::builtin_dataset_names()) {
    out += format("%-8s %-14s built in\n", "dataset", name.c_str());
    if (with_options) out += option_lines(*data::builtin_dataset_options(name));
  }
  out += "\nplugin search path:\n";
  for (const auto& dir : loader.search_path()) out += "  " + dir.string() + "\n";
  const auto found = loader.discover();
  if (found.empty()) out += "no plugins found\n";
  for (const auto& f : found) {
    std::string error = f.error;
    const auto plugin = with_options ? load_found(loader, f, error) : nullptr;
    if (!error.empty()) {
      out += "\n[unusable] " + f.file.string() + "\n  " + error + "\n";
      continue;
    }
    const auto& d = f.description;
    out += format("\n%-8s %-14s %s  %s%s\n", d.kind.c_str(), d.name.c_str(), d.version.c_str(), d.file.string().c_str(),
                  d.per_node ? "  (one per node)" : "");
    if (plugin) out += option_lines(plugin->options());
  }
  if (!with_options && !found.empty()) {
    out += "\n(plugins were not loaded; --with-options loads them and lists their options)\n";
  }
  return out;
}

std::vector<manifest::PluginOptions> plugin_options(PluginLoader& loader) {
  std::vector<manifest::PluginOptions> out;
  for (const auto& name : data::builtin_dataset_names())
    out.push_back({"dataset", name, *data::builtin_dataset_options(name)});
  for (const auto& f : loader.discover()) {
    std::string error = f.error;
    const auto plugin = load_found(loader, f, error);
    if (!plugin) {
      spdlog::warn("{}: left out of the schema: {}", f.file.string(), error);
      continue;
    }
    out.push_back({f.description.kind, f.description.name, plugin->options()});
  }
  return out;
}

}  // namespace exogym::runtime::plugin
