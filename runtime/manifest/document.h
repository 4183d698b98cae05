#pragma once
// A manifest file as JSON. Stricter than nlohmann::json::parse where a
// hand-written file needs it, and as lenient where it helps.
#include <filesystem>
#include <nlohmann/json.hpp>

namespace exogym::runtime::manifest {

// Parses `file`, allowing comments (a manifest is worth annotating) but not
// duplicate keys (JSON would silently keep the last one). Throws
// sdk::ConfigError: at the duplicate key's JSON path, or with an empty path
// for a file that cannot be read or is not JSON (giving line and column).
nlohmann::json read_json_document(const std::filesystem::path& file);

}  // namespace exogym::runtime::manifest
