#pragma once
// Finds plugin libraries, checks that they were built for this runtime, and
// creates models, strategies and datasets from them.
//
// Lookup of "plugin": "diloco" (kind strategy): --plugin-path dirs, then
// EXOGYM_PLUGIN_PATH (':'-separated), then lib/exogym/plugins next to the
// executable (bin/../lib/exogym/plugins: the install's own folder wherever
// it was installed or moved, or the build tree's). The file searched for is
// exogym_<kind>_<name>.so. A value ending in ".so" is a path to the file.
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/plugin/plugin_record.h"
#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace boost::dll {
class shared_library;
}

namespace exogym::sdk {
class Model;
class Strategy;
}  // namespace exogym::sdk

namespace exogym::runtime::plugin {

// One loaded plugin library. Every object it creates holds a reference to it,
// so the library is unloaded only after the last such object is destroyed
// (unloading earlier would leave vtables pointing into unmapped code).
class LoadedPlugin : public std::enable_shared_from_this<LoadedPlugin> {
 public:
  LoadedPlugin(std::shared_ptr<boost::dll::shared_library> library, PluginDescription description);
  ~LoadedPlugin();

  const PluginDescription& description() const { return description_; }
  const sdk::OptionSpecs& options() const { return options_; }

  // Validates manifest options against the plugin's declared options.
  // `path` is the JSON path of the options object, e.g. "strategy.options".
  // Options of type Path (and inside sections) that are relative become
  // absolute against `base_dir`, the manifest's folder, when it is given.
  nlohmann::json validate(const nlohmann::json& options, const std::string& path,
                          const std::filesystem::path& base_dir = {}) const;

  // `options` must come from validate().
  std::shared_ptr<sdk::Model> create_model(const nlohmann::json& options) const;
  std::shared_ptr<sdk::Strategy> create_strategy(const nlohmann::json& options) const;
  std::shared_ptr<sdk::Dataset> create_dataset(const nlohmann::json& options, const sdk::DatasetRequest& request) const;

 private:
  template <class T, class Factory, class... Args>
  std::shared_ptr<T> create(const char* alias, Args&&... args) const;

  std::shared_ptr<boost::dll::shared_library> library_;
  PluginDescription description_;
  sdk::OptionSpecs options_;
};

class PluginLoader {
 public:
  explicit PluginLoader(std::vector<std::filesystem::path> extra_dirs = {});

  // The folders searched, in order: `extra_dirs`, then `later_dirs`
  // (add_later_dirs), EXOGYM_PLUGIN_PATH, the install's plugin folder.
  std::vector<std::filesystem::path> search_path() const;
  // Folders to search after `extra_dirs`: a resumed run's recorded plugin
  // folders (command/resume.h), which an explicit --plugin-path overrides.
  // Before the first load.
  void add_later_dirs(const std::vector<std::filesystem::path>& dirs);

  // Loads a plugin of `kind` named `name_or_file`. `json_path` names the
  // manifest field for error messages; `base_dir` resolves relative .so paths.
  std::shared_ptr<LoadedPlugin> load(const std::string& kind, const std::string& name_or_file,
                                     const std::string& json_path, const std::filesystem::path& base_dir = {});

  // Loads the library at `file` once its record (read from the file, see
  // plugin_record.h) shows the runtime's ABI version and fingerprint: no
  // code of a refused library runs.
  std::shared_ptr<LoadedPlugin> load_file(const std::filesystem::path& file);

  struct Found {
    std::filesystem::path file;
    PluginDescription description;  // from the record; empty if unusable
    std::string error;              // why it cannot be used; empty if it can
  };
  // Every regular file named exogym_*.so in the search path (first
  // occurrence of a file name wins, as in lookup), described from its record
  // and checked as load_file() would, without loading any.
  std::vector<Found> discover() const;

 private:
  std::vector<std::filesystem::path> extra_dirs_, later_dirs_;
  std::mutex mutex_;
  std::map<std::filesystem::path, std::shared_ptr<LoadedPlugin>> loaded_;
};

// The file name a plugin of this kind and name is looked up under.
std::string plugin_file_name(const std::string& kind, const std::string& name);

}  // namespace exogym::runtime::plugin
