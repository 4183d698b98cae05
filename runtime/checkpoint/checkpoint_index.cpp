#include "exogym/runtime/checkpoint/checkpoint_index.h"

#include "exogym/runtime/util/hash.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kIndexFile = "index.json";

namespace {
const char* const kIndexFormat = "exogym-checkpoint-1";
}

json seal_index(json index) {
  index.erase("digest");
  util::Fnv1a hash;
  hash.add(index.dump());
  index["digest"] = hash.hex();
  return index;
}

json CheckpointIndex::to_json() const {
  return seal_index({{"format", kIndexFormat},
                     {"step", step},
                     {"nodes", nodes},
                     {"processes", processes},
                     {"abi", abi},
                     {"exogym_version", exogym_version},
                     {"plugins", plugins},
                     {"manifest", {{"hash", manifest_hash}, {"settings", settings}}},
                     {"sections", sections}});
}

CheckpointIndex CheckpointIndex::from_json(const json& j, const fs::path& file) {
  if (!j.is_object() || !j.contains("digest") || !j.at("digest").is_string())
    throw sdk::DataError(file.string() + ": not a valid checkpoint index: no \"digest\"");
  // Every field is read back (the CSVs' lengths, the last evaluation...):
  // an edit anywhere is damage, found before anything uses it.
  if (seal_index(j).at("digest") != j.at("digest"))
    throw sdk::DataError(file.string() + ": damaged (its fields do not match its digest)");
  try {
    if (j.at("format").get<std::string>() != kIndexFormat)
      throw sdk::DataError(file.string() + ": unknown checkpoint format " + j.at("format").dump());
    CheckpointIndex index;
    index.step = j.at("step").get<int64_t>();
    index.nodes = j.at("nodes").get<int>();
    index.processes = j.at("processes").get<int>();
    index.abi = j.at("abi").get<int>();
    index.exogym_version = j.at("exogym_version").get<std::string>();
    index.plugins = j.at("plugins");
    index.manifest_hash = j.at("manifest").at("hash").get<std::string>();
    index.settings = j.at("manifest").at("settings");
    index.sections = j.at("sections");
    return index;
  } catch (const json::exception& e) {
    throw sdk::DataError(file.string() + ": not a valid checkpoint index: " + e.what());
  }
}

CheckpointIndex CheckpointIndex::read(const fs::path& folder) {
  const fs::path file = folder / kIndexFile;
  json j;
  try {
    j = json::parse(util::read_regular_file(file));
  } catch (const json::exception& e) {
    throw sdk::DataError(file.string() + ": damaged: " + e.what());
  }
  return from_json(j, file);
}

}  // namespace exogym::runtime::checkpoint
