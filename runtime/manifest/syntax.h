#pragma once
// The syntax of manifest strings that JSON types cannot express: run and
// variant names (they become folder names), device lists, and the node
// ranks that key per-node tables.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace exogym::runtime::manifest {

// How declarations and messages describe a name that becomes a folder.
extern const char* const kFolderNameNoun;

bool is_folder_name(const std::string& name);

// Throws sdk::ConfigError at `path` unless `value` is a string that
// is_folder_name accepts.
void check_folder_name(const nlohmann::json& value, const std::string& path);

// Why `device` is not "cpu", "auto", "cuda", "cuda:N" or "cuda:N,M,...", or
// nullopt when it is one. Syntax only: whether the devices exist is the
// runtime's business.
std::optional<std::string> device_problem(const std::string& device);

// The node a per-node table's key names. Throws sdk::ConfigError at `path`
// unless `key` is a rank of a run of `nodes` nodes ("0" to nodes - 1).
int node_rank(const std::string& key, const std::string& path, int nodes);

}  // namespace exogym::runtime::manifest
