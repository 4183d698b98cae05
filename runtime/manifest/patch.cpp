#include "exogym/runtime/manifest/patch.h"

namespace exogym::runtime::manifest {

using nlohmann::json;

namespace {

// The keys whose value owns the sibling "options": another plugin or
// dataset declares other options (DiLoCo's "H" is unknown to allreduce).
constexpr const char* kOwnerKeys[] = {"plugin", "dataset"};

bool switches_owner(const json& target, const json& patch) {
  for (const char* key : kOwnerKeys) {
    const auto given = patch.find(key);
    const auto had = target.find(key);
    if (given != patch.end() && had != target.end() && *given != *had) return true;
  }
  return false;
}

void refine(json& target, const json& patch);

void patch_value(json& target, const json& value) {
  if (!value.is_object()) {
    target = value;
    return;
  }
  if (is_named(value)) {
    target = json::object();
  } else if (target.is_string()) {
    // "sgd" and {"name": "sgd"} say the same: {"lr": 0.1} refines either
    // (a plain merge patch would drop the name, and with it the optimizer).
    target = json{{"name", target}};
  } else if (!target.is_object()) {
    target = json::object();
  } else if (switches_owner(target, value)) {
    target.erase("options");
  }
  refine(target, value);
}

void refine(json& target, const json& patch) {
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      target.erase(key);
    } else {
      patch_value(target[key], value);
    }
  }
}

}  // namespace

bool is_named(const json& value) {
  if (!value.is_object()) return false;
  const auto name = value.find("name");
  return name != value.end() && !name->is_null();
}

void apply_patch(json& doc, const json& patch) {
  if (!doc.is_object()) doc = json::object();
  refine(doc, patch);
}

}  // namespace exogym::runtime::manifest
