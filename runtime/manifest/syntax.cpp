#include "exogym/runtime/manifest/syntax.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

using nlohmann::json;
using sdk::ConfigError;

const char* const kFolderNameNoun = "folder name (letters, digits, '-', '_' and '.'; at most 200 of them)";

namespace {

bool all_digits(const std::string& text, size_t max_length) {
  return !text.empty() && text.size() <= max_length &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_folder_name(const std::string& name) {
  // 200 leaves room for a "-N" suffix (output/run_folder.h) within a file
  // system's 255 bytes: longer fails only at mkdir, after the data loaded.
  constexpr size_t kMaxLength = 200;
  if (name.empty() || name.size() > kMaxLength || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

void check_folder_name(const json& value, const std::string& path) {
  if (!value.is_string() || !is_folder_name(value.get_ref<const std::string&>()))
    throw ConfigError(path, std::string("expected a ") + kFolderNameNoun + ", got " + sdk::json_excerpt(value));
}

std::optional<std::string> device_problem(const std::string& device) {
  const std::string bad =
      "expected \"cpu\", \"auto\", \"cuda\", \"cuda:N\" or \"cuda:N,M,...\", got " + sdk::json_excerpt(device);
  if (device == "cpu" || device == "auto" || device == "cuda") return std::nullopt;
  const std::string prefix = "cuda:";
  if (device.compare(0, prefix.size(), prefix) != 0) return bad;
  std::set<int> seen;
  std::stringstream list(device.substr(prefix.size()));
  std::string index;
  size_t count = 0;
  while (std::getline(list, index, ',')) {
    ++count;
    if (!all_digits(index, 4)) return bad;
    // Nodes go round-robin over the list: a repeated GPU is a typo, not a wish.
    const int gpu = std::stoi(index);
    if (!seen.insert(gpu).second) {
      return "lists cuda:" + std::to_string(gpu) + " twice, got " + sdk::json_excerpt(device);
    }
  }
  // getline drops a trailing empty field ("cuda:0,").
  if (count == 0 || device.back() == ',') return bad;
  return std::nullopt;
}

int node_rank(const std::string& key, const std::string& path, int nodes) {
  if (!all_digits(key, 9)) {
    throw ConfigError(path, "expected a node rank (\"0\" to \"" + std::to_string(nodes - 1) + "\") as key");
  }
  const int rank = std::stoi(key);
  if (rank >= nodes) {
    throw ConfigError(path, "node " + key + " does not exist: the run has " + std::to_string(nodes) + " node" +
                                (nodes == 1 ? "" : "s") + " (0 to " + std::to_string(nodes - 1) + ")");
  }
  return rank;
}

}  // namespace exogym::runtime::manifest
