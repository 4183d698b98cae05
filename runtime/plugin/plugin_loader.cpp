#include "exogym/runtime/plugin/plugin_loader.h"

#include <spdlog/spdlog.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <sstream>
#include <type_traits>

#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/plugin_abi.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::plugin {

namespace fs = std::filesystem;
using sdk::PluginError;

std::string plugin_file_name(const std::string& kind, const std::string& name) {
  return "exogym_" + kind + "_" + name + ".so";
}

LoadedPlugin::LoadedPlugin(std::shared_ptr<boost::dll::shared_library> library, PluginDescription description)
    : library_(std::move(library)), description_(std::move(description)) {
  auto options_fn = library_->get_alias<std::remove_pointer_t<sdk::OptionsFunction>>("exogym_plugin_options");
  try {
    options_ = options_fn();
  } catch (...) {
    throw PluginError(description_.file.string() + ": exogym_plugin_options failed: " + util::current_exception_text());
  }
}

LoadedPlugin::~LoadedPlugin() {
  // The options may hold strings allocated by the plugin's inline code; free
  // them while its code is still mapped.
  options_.clear();
}

namespace {

// Makes the relative paths among `options` (validated against `specs`)
// absolute against `base_dir`.
void resolve_paths(nlohmann::json& options, const sdk::OptionSpecs& specs, const fs::path& base_dir) {
  if (!options.is_object()) return;
  for (const auto& spec : specs) {
    auto it = options.find(spec.name);
    if (it == options.end()) continue;
    if (spec.type == sdk::OptionType::Path && it->is_string()) {
      const fs::path given = it->get<std::string>();
      if (given.is_relative()) *it = (base_dir / given).lexically_normal().string();
    } else if (spec.type == sdk::OptionType::Section) {
      resolve_paths(*it, spec.fields, base_dir);
    }
  }
}

}  // namespace

nlohmann::json LoadedPlugin::validate(const nlohmann::json& options, const std::string& path,
                                      const fs::path& base_dir) const {
  nlohmann::json validated = sdk::validate_options(options, options_, path);
  if (!base_dir.empty()) resolve_paths(validated, options_, base_dir);
  return validated;
}

template <class T, class Factory, class... Args>
std::shared_ptr<T> LoadedPlugin::create(const char* alias, Args&&... args) const {
  if (!library_->has(alias)) {
    throw PluginError(description_.file.string() + ": a " + description_.kind + " plugin exports no " + alias);
  }
  auto factory = library_->get_alias<Factory>(alias);
  T* raw = nullptr;
  try {
    raw = factory(std::forward<Args>(args)...);
  } catch (const sdk::Error&) {
    throw;  // the plugin's own words; the caller adds the JSON path or the node
  } catch (...) {
    // An allocation that failed says the size is wrong: the caller names the field.
    if (util::current_exception_is_out_of_memory()) throw;
    throw sdk::Error(description_.file.string() + ": the " + description_.kind + " \"" + description_.name +
                     "\" failed in its constructor: " + util::current_exception_text());
  }
  if (!raw) throw PluginError(description_.file.string() + ": " + alias + " returned null");
  // The deleter keeps this library loaded for as long as the object lives.
  auto self = shared_from_this();
  return std::shared_ptr<T>(raw, [self](T* object) { delete object; });
}

std::shared_ptr<sdk::Model> LoadedPlugin::create_model(const nlohmann::json& options) const {
  return create<sdk::Model, std::remove_pointer_t<sdk::ModelFactory>>("exogym_create_model", options);
}

std::shared_ptr<sdk::Strategy> LoadedPlugin::create_strategy(const nlohmann::json& options) const {
  return create<sdk::Strategy, std::remove_pointer_t<sdk::StrategyFactory>>("exogym_create_strategy", options);
}

std::shared_ptr<sdk::Dataset> LoadedPlugin::create_dataset(const nlohmann::json& options,
                                                           const sdk::DatasetRequest& request) const {
  return create<sdk::Dataset, std::remove_pointer_t<sdk::DatasetFactory>>("exogym_create_dataset", options, request);
}

PluginLoader::PluginLoader(std::vector<fs::path> extra_dirs) : extra_dirs_(std::move(extra_dirs)) {}

static void append_path_list(std::vector<fs::path>& out, const std::string& list) {
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) out.emplace_back(item);
  }
}

void PluginLoader::add_later_dirs(const std::vector<fs::path>& dirs) {
  later_dirs_.insert(later_dirs_.end(), dirs.begin(), dirs.end());
}

std::vector<fs::path> PluginLoader::search_path() const {
  std::vector<fs::path> dirs = extra_dirs_;
  dirs.insert(dirs.end(), later_dirs_.begin(), later_dirs_.end());
  if (const char* env = std::getenv("EXOGYM_PLUGIN_PATH")) append_path_list(dirs, env);
  // The install's own folder, found from the running program
  // (bin/../lib/exogym/plugins), which is also the build tree's. No prefix
  // configured at build time: an install moved or installed elsewhere
  // (cmake --install --prefix) would otherwise search, and be shadowed by, a
  // stale install in that prefix.
  boost::dll::fs::error_code ec;
  fs::path exe = boost::dll::program_location(ec);
  if (!ec) dirs.push_back(exe.parent_path().parent_path() / "lib" / "exogym" / "plugins");
  std::vector<fs::path> unique;
  for (auto& dir : dirs) {
    std::error_code fs_ec;
    fs::path normal = fs::weakly_canonical(dir, fs_ec);
    if (fs_ec) normal = dir;
    bool seen = false;
    for (auto& u : unique) seen = seen || u == normal;
    if (!seen) unique.push_back(normal);
  }
  return unique;
}

namespace {

// Throws sdk::PluginError unless the record matches this runtime.
void check_record(const PluginDescription& d) {
  if (d.abi_version != sdk::runtime_abi_version()) {
    throw PluginError(d.file.string() + ": built for plugin ABI version " + std::to_string(d.abi_version) +
                      ", but this runtime uses ABI version " + std::to_string(sdk::runtime_abi_version()) +
                      "; rebuild the plugin against this ExoGym SDK");
  }
  if (d.fingerprint != sdk::runtime_fingerprint()) {
    throw PluginError(d.file.string() + ": built with \"" + d.fingerprint + "\", but this runtime was built with \"" +
                      sdk::runtime_fingerprint() + "\"; rebuild the plugin with the same compiler and LibTorch");
  }
}

bool is_plain_file(const fs::path& file) {
  std::error_code ec;
  return fs::is_regular_file(file, ec);
}

}  // namespace

std::shared_ptr<LoadedPlugin> PluginLoader::load_file(const fs::path& requested) {
  std::error_code ec;
  fs::path file = fs::weakly_canonical(requested, ec);
  if (ec) file = requested;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = loaded_.find(file); it != loaded_.end()) return it->second;
  if (!fs::exists(file, ec)) throw PluginError(file.string() + ": no such plugin file");
  PluginDescription description = read_plugin_record(file);
  check_record(description);

  // From here on the plugin's code runs: its static constructors first.
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code load_ec;
  library->load(file, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, load_ec);
  if (load_ec) {
    throw PluginError(file.string() + ": cannot load: " + load_ec.message() +
                      " (is it a shared library built against this ExoGym SDK and its LibTorch?)");
  }
  if (!library->has("exogym_plugin_options")) {
    throw PluginError(file.string() + ": exports no exogym_plugin_options; export it with an EXOGYM_*_PLUGIN macro");
  }
  if (auto log = spdlog::get("exogym")) {
    log->debug("loaded {} plugin \"{}\" {} from {}", description.kind, description.name, description.version,
               file.string());
  }
  auto plugin = std::make_shared<LoadedPlugin>(std::move(library), std::move(description));
  loaded_.emplace(file, plugin);
  return plugin;
}

// The regular files named exogym_*.so in `dirs`, the first of each name.
// Anything else (a FIFO would block a reader) is skipped.
static std::vector<fs::path> plugin_files(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> result;
  std::vector<std::string> seen;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("exogym_", 0) == 0 && entry.path().extension() == ".so" && is_plain_file(entry.path())) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string name = file.filename().string();
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      result.push_back(file);
    }
  }
  return result;
}

std::shared_ptr<LoadedPlugin> PluginLoader::load(const std::string& kind, const std::string& name_or_file,
                                                 const std::string& json_path, const fs::path& base_dir) {
  std::shared_ptr<LoadedPlugin> plugin;
  const bool is_path = name_or_file.size() > 3 && name_or_file.compare(name_or_file.size() - 3, 3, ".so") == 0;
  if (is_path) {
    fs::path file = name_or_file;
    if (file.is_relative() && !base_dir.empty()) file = base_dir / file;
    try {
      plugin = load_file(file);
    } catch (const PluginError& e) {
      throw sdk::ConfigError(json_path, e.what());
    }
  } else {
    const std::string wanted = plugin_file_name(kind, name_or_file);
    const auto dirs = search_path();
    for (const auto& dir : dirs) {
      std::error_code ec;
      if (fs::exists(dir / wanted, ec)) {
        try {
          plugin = load_file(dir / wanted);
        } catch (const PluginError& e) {
          throw sdk::ConfigError(json_path, e.what());
        }
        break;
      }
    }
    if (!plugin) {
      // Suggestions come from file names alone: nothing else is opened.
      std::vector<std::string> names;
      const std::string prefix = "exogym_" + kind + "_";
      for (const auto& found : plugin_files(dirs)) {
        const std::string stem = found.stem().string();
        if (stem.rfind(prefix, 0) == 0) names.push_back(stem.substr(prefix.size()));
      }
      std::string message = "no " + kind + " plugin named \"" + name_or_file + "\"";
      std::string suggestion = sdk::closest_name(name_or_file, names);
      if (!suggestion.empty()) message += "; did you mean \"" + suggestion + "\"?";
      message += " (available:";
      for (auto& n : names) message += " " + n;
      if (names.empty()) message += " none";
      message += "; searched for " + wanted + " in";
      for (auto& d : dirs) message += " " + d.string();
      message += ")";
      throw sdk::ConfigError(json_path, message);
    }
  }
  const auto& d = plugin->description();
  if (d.kind != kind) {
    throw sdk::ConfigError(json_path, d.file.string() + " is a " + d.kind + " plugin, expected a " + kind + " plugin");
  }
  if (!is_path && d.name != name_or_file) {
    throw sdk::ConfigError(json_path,
                           d.file.string() + " calls itself \"" + d.name + "\", expected \"" + name_or_file + "\"");
  }
  return plugin;
}

std::vector<PluginLoader::Found> PluginLoader::discover() const {
  std::vector<Found> result;
  for (const auto& file : plugin_files(search_path())) {
    Found found{file, {}, ""};
    try {
      found.description = read_plugin_record(file);
      check_record(found.description);
    } catch (const sdk::Error& e) {
      found.error = e.what();
    }
    result.push_back(std::move(found));
  }
  return result;
}

}  // namespace exogym::runtime::plugin
