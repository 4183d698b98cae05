// AsyncSchedule::check_node_state (async_schedule.h): an asynchronous node's
// checkpointed state, checked before a resume uses it. An edited file with
// its digest recomputed is otherwise taken as it is: a negative count of
// steps reached an internal check mid-run.
#include <cmath>
#include <stdexcept>
#include <string>

#include "exogym/runtime/async/async_schedule.h"

namespace exogym::runtime::async {

namespace {

using nlohmann::json;

const json& field(const json& object, const std::string& where, const char* key) {
  if (!object.is_object() || !object.contains(key)) throw std::invalid_argument("\"" + where + key + "\" is missing");
  return object.at(key);
}

void check_flag(const json& object, const std::string& where, const char* key) {
  if (!field(object, where, key).is_boolean()) throw std::invalid_argument("\"" + where + key + "\" is not a boolean");
}

int64_t check_count(const json& object, const std::string& where, const char* key) {
  const json& value = field(object, where, key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0)
    throw std::invalid_argument("\"" + where + key + "\" is not a count at or above 0, got " + value.dump());
  return value.get<int64_t>();
}

void check_amount(const json& object, const std::string& where, const char* key) {
  const json& value = field(object, where, key);
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
    throw std::invalid_argument("\"" + where + key + "\" is not a finite number at or above 0, got " + value.dump());
}

void check_tensors(const std::map<std::string, at::Tensor>& tensors, const std::string& prefix, int64_t count) {
  // More tensors than the node has parameters cannot be; counting past the
  // file's tensors finds one missing first.
  for (int64_t i = 0; i < count; ++i) {
    if (!tensors.count(prefix + std::to_string(i)))
      throw std::invalid_argument("tensor \"async." + prefix + std::to_string(i) + "\" is missing");
  }
}

}  // namespace

void AsyncSchedule::check_node_state(const std::map<std::string, at::Tensor>& tensors, const json& meta) {
  if (!meta.is_object()) throw std::invalid_argument("not an object");
  check_flag(meta, "", "awaiting");
  check_flag(meta, "", "pull");
  for (const char* key : {"life", "base_version", "steps_computed"}) check_count(meta, "", key);
  if (const json& f = field(meta, "", "in_flight"); !f.is_null()) {
    for (const char* key : {"arrival", "upload"}) check_amount(f, "in_flight.", key);
    for (const char* key : {"base_version", "life"}) check_count(f, "in_flight.", key);
    check_tensors(tensors, "update.", check_count(f, "in_flight.", "count"));
  }
  if (const json& r = field(meta, "", "reply"); !r.is_null()) {
    check_count(r, "reply.", "version");
    for (const char* key : {"arrival", "bytes", "time"}) check_amount(r, "reply.", key);
    check_tensors(tensors, "reply.", check_count(r, "reply.", "count"));
  }
}

}  // namespace exogym::runtime::async
