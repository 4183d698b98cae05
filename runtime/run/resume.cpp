#include "exogym/runtime/run/resume.h"

#include "exogym/runtime/manifest/document.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::run {

namespace fs = std::filesystem;

manifest::ManifestSet resumed_manifest(const fs::path& run_dir, const std::vector<std::string>& overrides) {
  if (!fs::is_directory(run_dir)) throw sdk::DataError(run_dir.string() + ": no such folder");
  const fs::path config = run_dir / "config.json";
  if (!fs::exists(config)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
      if (fs::exists(entry.path() / "config.json")) {
        throw sdk::DataError(run_dir.string() + ": a folder of variants; resume one variant at a time, e.g. " +
                             "exogym-run --resume " + entry.path().string());
      }
    }
    throw sdk::DataError(run_dir.string() + ": not a run folder (no config.json)");
  }
  nlohmann::json doc;
  try {
    doc = manifest::read_json_document(config);
  } catch (const sdk::ConfigError& e) {
    throw sdk::DataError(config.string() + ": " + e.message());
  }
  if (!doc.is_object()) throw sdk::DataError(config.string() + ": not a run's configuration");
  doc.erase("runtime");  // the runtime's notes, not manifest fields
  const std::string name = doc.value("name", run_dir.filename().string());
  return manifest::parse_manifest(doc, run_dir, name, overrides);
}

}  // namespace exogym::runtime::run
