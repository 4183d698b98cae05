#include "exogym/runtime/manifest/overrides.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "exogym/runtime/manifest/json_limits.h"
#include "exogym/runtime/manifest/patch.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

using nlohmann::json;
using sdk::ConfigError;
using sdk::json_excerpt;

namespace {

// "train.max_steps" -> {"train", "max_steps"}.
std::vector<std::string> key_parts(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream stream(key);
  std::string part;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  if (key.back() == '.' || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    throw ConfigError("--set", "empty component in key " + json_excerpt(key));
  }
  // An override applies to the base and to every variant alike; editing the
  // variant list itself from the command line would be ambiguous.
  if (parts.front() == "runs") {
    throw ConfigError("--set", "cannot override " + json_excerpt(key) +
                                   ": overrides already apply to every variant; edit \"runs\" in the manifest");
  }
  return parts;
}

}  // namespace

void apply_override(json& doc, const std::string& assignment) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    throw ConfigError("--set", "expected key=value (e.g. train.max_steps=100), got " + json_excerpt(assignment));
  }
  const std::string key = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  if (key.empty()) {
    throw ConfigError("--set", "expected key=value with a non-empty key, got " + json_excerpt(assignment));
  }
  const std::vector<std::string> parts = key_parts(key);

  // Only a value that reads as JSON is checked: "runs/1e400" is a string.
  const bool looks_like_json = !text.empty() && std::strchr("[{-0123456789", text.front()) != nullptr;
  if (auto violation = looks_like_json ? find_json_limit_violation(text) : std::nullopt) {
    throw ConfigError("--set", json_excerpt(assignment) + ", column " + std::to_string(equals + 1 + violation->column) +
                                   ": " + violation->message);
  }
  const json value = json::accept(text) ? json::parse(text) : json(text);
  if (doc.is_null()) doc = json::object();
  if (!doc.is_object())
    throw ConfigError("--set", "cannot set " + json_excerpt(key) + ": the manifest is not an object");
  // Checked before anything changes, so that a failed override leaves `doc`
  // as it was. A name given alone ("sgd") has keys to set, as {"name": ...}.
  const json* current = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size() && current->is_object(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    const auto next = current->find(parts[i]);
    if (next == current->end()) break;
    if (!next->is_object() && !next->is_string() && !next->is_null()) {
      throw ConfigError("--set", "cannot set " + json_excerpt(key) + ": " + walked + " is " + json_excerpt(*next) +
                                     ", not an object");
    }
    current = &*next;
  }
  // a.b.c=value is the patch {"a": {"b": {"c": value}}}, applied as a
  // variant's: a named object replaces, an unnamed one refines (patch.h).
  json patch = value;
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    json outer = json::object();
    outer[*part] = std::move(patch);
    patch = std::move(outer);
  }
  apply_patch(doc, patch);
}

}  // namespace exogym::runtime::manifest
