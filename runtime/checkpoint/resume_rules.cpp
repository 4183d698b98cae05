#include "exogym/runtime/checkpoint/resume_rules.h"

#include "exogym/runtime/util/hash.h"

namespace exogym::runtime::checkpoint {

using nlohmann::json;

const std::vector<std::string>& changeable_fields() {
  // "device": a run checkpointed on a GPU may continue on a machine without
  // one (and back): checkpoints hold CPU tensors, the dropout generator is
  // the CPU's.
  // "execution": stacked and per-node runs keep the same per-node state.
  static const std::vector<std::string> fields = {
      "name",        "train.max_steps", "eval",          "checkpoint", "output", "parallelism", "threads",
      "pin_threads", "data.train.path", "data.val.path", "runtime",    "device", "execution"};
  return fields;
}

json exact_settings(const json& config) {
  json settings = config;
  settings.erase("runtime");  // the runtime's notes in config.json, not manifest fields
  for (const auto& field : changeable_fields()) {
    json* parent = &settings;
    std::string rest = field;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
      auto it = parent->find(rest.substr(0, dot));
      if (it == parent->end() || !it->is_object()) {
        parent = nullptr;
        break;
      }
      parent = &*it;
    }
    if (parent && parent->is_object()) parent->erase(rest);
  }
  return settings;
}

std::string settings_hash(const json& settings) {
  util::Fnv1a hash;
  hash.add(settings.dump());
  return hash.hex();
}

namespace {

std::optional<Difference> differ(const json& before, const json& after, const std::string& path) {
  if (before.is_object() && after.is_object()) {
    json keys = json::object();
    for (const auto& item : before.items()) keys[item.key()] = true;
    for (const auto& item : after.items()) keys[item.key()] = true;
    for (const auto& item : keys.items()) {
      const std::string child = path.empty() ? item.key() : path + "." + item.key();
      const json none;
      const json& a = before.contains(item.key()) ? before.at(item.key()) : none;
      const json& b = after.contains(item.key()) ? after.at(item.key()) : none;
      if (auto d = differ(a, b, child)) return d;
    }
    return std::nullopt;
  }
  if (before == after) return std::nullopt;
  return Difference{path, before, after};
}

}  // namespace

std::optional<Difference> first_difference(const json& before, const json& after) { return differ(before, after, ""); }

}  // namespace exogym::runtime::checkpoint
