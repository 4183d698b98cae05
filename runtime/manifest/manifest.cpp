#include "exogym/runtime/manifest/manifest.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "exogym/runtime/manifest/units.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::ConfigError;

namespace {

// "runs" is listed so that a misspelt "run" gets a suggestion; the validator
// itself only ever sees manifests with "runs" already expanded away.
const std::vector<std::string> kTopLevelKeys = {"name",     "seed",        "nodes", "device",   "parallelism",
                                                "threads",  "pin_threads", "model", "strategy", "data",
                                                "train",    "eval",        "output", "network", "compute",
                                                "runs"};
const std::vector<std::string> kPluginKeys = {"plugin", "options"};
const std::vector<std::string> kDataKeys = {"train", "val"};
const std::vector<std::string> kDataSplitKeys = {"dataset", "path", "split", "partition", "options"};
const std::vector<std::string> kTrainKeys = {"max_steps", "batch_size", "minibatch_size"};
const std::vector<std::string> kEvalKeys = {"interval", "size", "batch_size", "target_loss"};
const std::vector<std::string> kNetworkKeys = {"bandwidth", "latency", "nodes"};
const std::vector<std::string> kLinkKeys = {"bandwidth", "latency"};
const std::vector<std::string> kComputeKeys = {"step_time", "speed"};
const std::vector<std::string> kOutputKeys = {"dir", "save_model"};
const std::vector<std::string> kPartitions = {"iid", "contiguous"};

std::string join_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

// The offending value as the user wrote it, shortened so that a misplaced
// object does not flood the message.
std::string describe(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string json_quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// One JSON object of the schema. Unknown keys are rejected up front, so that
// a misspelt key is reported as such instead of as "required" for the key it
// was meant to be.
class ObjectReader {
 public:
  ObjectReader(const json& value, std::string path, const std::vector<std::string>& known)
      : value_(value), path_(std::move(path)) {
    if (!value.is_object()) throw ConfigError(path_, "expected an object, got " + describe(value));
    for (const auto& item : value.items()) {
      if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
      std::string message = "unknown key";
      const std::string suggestion = sdk::closest_name(item.key(), known);
      if (!suggestion.empty()) {
        message += "; did you mean " + json_quoted(suggestion) + "?";
      } else {
        message += " (expected one of: " + join_words(known) + ")";
      }
      throw ConfigError(join_path(path_, item.key()), message);
    }
  }

  // null counts as absent, as in a JSON merge patch: the default applies.
  const json* find(const std::string& key) const {
    auto it = value_.find(key);
    return it == value_.end() || it->is_null() ? nullptr : &*it;
  }

  std::string path(const std::string& key) const { return join_path(path_, key); }

 private:
  const json& value_;
  std::string path_;
};

const json& empty_object() {
  static const json empty = json::object();
  return empty;
}

// Integral numbers, including integral floats such as 1e4, which users write
// for step counts.
std::optional<int64_t> integral(const json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(number);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && std::trunc(number) == number && std::fabs(number) < 9.2e18) {
      return static_cast<int64_t>(number);
    }
  }
  return std::nullopt;
}

enum class Sign { Positive, NonNegative };

int64_t read_integer(const ObjectReader& reader, const std::string& key, Sign sign, std::optional<int64_t> fallback,
                     int64_t max = INT64_MAX) {
  const json* value = reader.find(key);
  if (!value) {
    if (!fallback) throw ConfigError(reader.path(key), "required");
    return *fallback;
  }
  const std::string expected = sign == Sign::Positive ? "a positive integer" : "a non-negative integer";
  const int64_t min = sign == Sign::Positive ? 1 : 0;
  const auto number = integral(*value);
  if (!number || *number < min)
    throw ConfigError(reader.path(key), "expected " + expected + ", got " + describe(*value));
  if (*number > max) {
    throw ConfigError(reader.path(key),
                      "expected " + expected + " no larger than " + std::to_string(max) + ", got " + describe(*value));
  }
  return *number;
}

int read_int(const ObjectReader& reader, const std::string& key, Sign sign, int fallback) {
  return static_cast<int>(read_integer(reader, key, sign, fallback, INT_MAX));
}

uint64_t read_seed(const ObjectReader& reader) {
  const json* value = reader.find("seed");
  if (!value) return 42;
  if (value->is_number_unsigned()) return value->get<uint64_t>();
  const auto number = integral(*value);
  if (!number || *number < 0) throw ConfigError("seed", "expected a non-negative integer, got " + describe(*value));
  return static_cast<uint64_t>(*number);
}

// A string key; `fallback` empty means required. Empty strings are never
// meaningful in the schema, so they are rejected rather than passed on.
std::string read_string(const ObjectReader& reader, const std::string& key, std::optional<std::string> fallback) {
  const json* value = reader.find(key);
  if (!value) {
    if (!fallback) throw ConfigError(reader.path(key), "required");
    return *fallback;
  }
  if (!value->is_string()) throw ConfigError(reader.path(key), "expected a string, got " + describe(*value));
  auto text = value->get<std::string>();
  if (text.empty()) throw ConfigError(reader.path(key), "expected a non-empty string, got \"\"");
  return text;
}

bool read_bool(const ObjectReader& reader, const std::string& key, bool fallback) {
  const json* value = reader.find(key);
  if (!value) return fallback;
  if (!value->is_boolean()) throw ConfigError(reader.path(key), "expected true or false, got " + describe(*value));
  return value->get<bool>();
}

// Plugin options stay raw: the plugin loader validates them against the
// plugin's declared options. Only their shape is checked here.
json read_options(const ObjectReader& reader) {
  const json* value = reader.find("options");
  if (!value) return json::object();
  if (!value->is_object()) throw ConfigError(reader.path("options"), "expected an object, got " + describe(*value));
  return *value;
}

// Run and variant names become folder names.
bool is_safe_folder_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

const char* kSafeNameRule = "letters, digits, '-', '_' and '.'";

// Syntax only: whether the devices exist is the runtime's business.
std::optional<std::string> device_problem(const std::string& device) {
  static const std::string forms = "expected \"cpu\", \"auto\", \"cuda\", \"cuda:N\" or \"cuda:N,M,...\"";
  if (device == "cpu" || device == "auto" || device == "cuda") return std::nullopt;
  const std::string prefix = "cuda:";
  if (device.compare(0, prefix.size(), prefix) != 0) return forms + ", got " + json_quoted(device);
  std::set<std::string> seen;
  std::stringstream list(device.substr(prefix.size()));
  std::string index;
  size_t count = 0;
  while (std::getline(list, index, ',')) {
    ++count;
    const bool digits = !index.empty() && index.size() <= 4 &&
                        std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return forms + ", got " + json_quoted(device);
    // Nodes go round-robin over the list: a repeated GPU is a typo, not a wish.
    if (!seen.insert(std::to_string(std::stoi(index))).second) {
      return "lists cuda:" + std::to_string(std::stoi(index)) + " twice, got " + json_quoted(device);
    }
  }
  // getline drops a trailing empty field ("cuda:0,").
  if (count == 0 || device.back() == ',') return forms + ", got " + json_quoted(device);
  return std::nullopt;
}

fs::path resolve_path(const fs::path& base_dir, const std::string& text) {
  fs::path path(text);
  if (path.is_relative()) path = base_dir / path;
  path = path.lexically_normal();
  // "runs/" and "runs" are the same folder; keep one spelling.
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}

PluginRef read_plugin(const ObjectReader& top, const std::string& key) {
  const json* value = top.find(key);
  if (!value) throw ConfigError(top.path(key), "required");
  ObjectReader reader(*value, top.path(key), kPluginKeys);
  PluginRef ref;
  ref.plugin = read_string(reader, "plugin", std::nullopt);
  ref.options = read_options(reader);
  ref.path = top.path(key);
  return ref;
}

DataSpec read_data_split(const json& value, const std::string& path, const std::string& default_split,
                         const fs::path& base_dir) {
  ObjectReader reader(value, path, kDataSplitKeys);
  DataSpec spec;
  spec.json_path = path;
  spec.dataset = read_string(reader, "dataset", std::nullopt);
  if (reader.find("path")) spec.path = resolve_path(base_dir, read_string(reader, "path", std::nullopt));
  spec.split = read_string(reader, "split", default_split);
  // Validation data is not sharded, but a bad value is still a typo worth
  // reporting rather than ignoring.
  spec.partition = read_string(reader, "partition", std::string("iid"));
  if (std::find(kPartitions.begin(), kPartitions.end(), spec.partition) == kPartitions.end()) {
    std::string message = "expected \"iid\" or \"contiguous\", got " + json_quoted(spec.partition);
    const std::string suggestion = sdk::closest_name(spec.partition, kPartitions);
    if (!suggestion.empty()) message += "; did you mean " + json_quoted(suggestion) + "?";
    throw ConfigError(reader.path("partition"), message);
  }
  spec.options = read_options(reader);
  return spec;
}

json plugin_json(const PluginRef& ref) { return {{"plugin", ref.plugin}, {"options", ref.options}}; }

json data_json(const DataSpec& spec) {
  json out = {
      {"dataset", spec.dataset}, {"split", spec.split}, {"partition", spec.partition}, {"options", spec.options}};
  if (!spec.path.empty()) out["path"] = spec.path.string();
  return out;
}

// A per-node table such as {"3": ...}: keys are node ranks of this run.
int node_key(const std::string& key, const std::string& path, int nodes) {
  const bool digits = !key.empty() && key.size() <= 9 &&
                      std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) throw ConfigError(path, "expected a node rank (\"0\" to \"" + std::to_string(nodes - 1) + "\") as key");
  const int rank = std::stoi(key);
  if (rank >= nodes) {
    throw ConfigError(path, "node " + key + " does not exist: the run has " + std::to_string(nodes) + " node" +
                                (nodes == 1 ? "" : "s") + " (0 to " + std::to_string(nodes - 1) + ")");
  }
  return rank;
}

// The "bandwidth" and "latency" of `reader`'s object; absent ones keep `fallback`'s.
sim::Link read_link(const ObjectReader& reader, sim::Link fallback) {
  sim::Link link = fallback;
  if (const json* bandwidth = reader.find("bandwidth")) link.bandwidth = parse_bandwidth(*bandwidth, reader.path("bandwidth"));
  if (const json* latency = reader.find("latency")) link.latency = parse_duration(*latency, reader.path("latency"));
  return link;
}

// "network": {"bandwidth": "1Gbit/s", "latency": "10ms", "nodes": {"3": {...}}}.
NetworkSpec read_network(const json* value, int nodes, json& resolved) {
  ObjectReader reader(value ? *value : empty_object(), "network", kNetworkKeys);
  NetworkSpec spec;
  spec.link = read_link(reader, spec.link);
  resolved = {{"bandwidth", reader.find("bandwidth") ? *reader.find("bandwidth") : json("1Gbit/s")},
              {"latency", reader.find("latency") ? *reader.find("latency") : json("10ms")}};
  if (const json* per_node = reader.find("nodes")) {
    if (!per_node->is_object())
      throw ConfigError("network.nodes", "expected an object keyed by node rank, got " + describe(*per_node));
    json resolved_nodes = json::object();
    for (const auto& item : per_node->items()) {
      const std::string path = "network.nodes." + item.key();
      const int rank = node_key(item.key(), path, nodes);
      ObjectReader node_reader(item.value(), path, kLinkKeys);
      spec.per_node[rank] = read_link(node_reader, spec.link);
      resolved_nodes[item.key()] = item.value();
    }
    resolved["nodes"] = resolved_nodes;
  }
  return spec;
}

// "compute": {"step_time": "measured" | "50ms", "speed": {"3": 0.5}}.
ComputeSpec read_compute(const json* value, int nodes, json& resolved) {
  ObjectReader reader(value ? *value : empty_object(), "compute", kComputeKeys);
  ComputeSpec spec;
  resolved = {{"step_time", "measured"}};
  if (const json* step_time = reader.find("step_time")) {
    if (!(step_time->is_string() && step_time->get<std::string>() == "measured")) {
      spec.step_time = parse_duration(*step_time, "compute.step_time");
      if (*spec.step_time <= 0)
        throw ConfigError("compute.step_time", "expected \"measured\" or a positive duration, got " + describe(*step_time));
    }
    resolved["step_time"] = *step_time;
  }
  if (const json* speed = reader.find("speed")) {
    if (!speed->is_object())
      throw ConfigError("compute.speed", "expected an object keyed by node rank, got " + describe(*speed));
    for (const auto& item : speed->items()) {
      const std::string path = "compute.speed." + item.key();
      const int rank = node_key(item.key(), path, nodes);
      if (!item.value().is_number() || !(item.value().get<double>() > 0) || !std::isfinite(item.value().get<double>())) {
        throw ConfigError(path, "expected a positive speed factor (1 = nominal, 0.5 = half as fast), got " +
                                    describe(item.value()));
      }
      spec.speed[rank] = item.value().get<double>();
    }
    resolved["speed"] = *speed;
  }
  return spec;
}

// Validates one manifest without "runs" (a plain manifest, or a base merged
// with one variant) and fills in every default.
Manifest build_manifest(const json& doc, const fs::path& base_dir, const std::string& default_name,
                        const std::string& variant) {
  if (!doc.is_object()) throw ConfigError("", "a manifest must be a JSON object, got " + describe(doc));
  ObjectReader top(doc, "", kTopLevelKeys);
  Manifest m;
  m.variant = variant;
  m.base_dir = base_dir;

  if (const json* name = top.find("name")) {
    if (!name->is_string() || !is_safe_folder_name(name->get<std::string>())) {
      throw ConfigError("name", std::string("expected a folder name (") + kSafeNameRule + "), got " + describe(*name));
    }
    m.name = name->get<std::string>();
  } else if (default_name.empty()) {
    throw ConfigError("name", "required");
  } else if (!is_safe_folder_name(default_name)) {
    throw ConfigError("name", "not set, and the manifest file's name " + json_quoted(default_name) +
                                  " is not a folder name (" + kSafeNameRule + "); set \"name\"");
  } else {
    m.name = default_name;
  }

  m.seed = read_seed(top);
  m.nodes = read_int(top, "nodes", Sign::Positive, 1);
  m.device = read_string(top, "device", std::string("cpu"));
  if (auto problem = device_problem(m.device)) throw ConfigError("device", *problem);
  m.parallelism = read_int(top, "parallelism", Sign::NonNegative, 0);
  m.threads = read_int(top, "threads", Sign::NonNegative, 0);
  m.pin_threads = read_bool(top, "pin_threads", true);

  m.model = read_plugin(top, "model");
  m.strategy = read_plugin(top, "strategy");

  const json* data = top.find("data");
  if (!data) throw ConfigError("data", "required");
  ObjectReader data_reader(*data, "data", kDataKeys);
  const json* train_data = data_reader.find("train");
  if (!train_data) throw ConfigError("data.train", "required");
  m.train_data = read_data_split(*train_data, "data.train", "train", base_dir);
  if (const json* val_data = data_reader.find("val"))
    m.val_data = read_data_split(*val_data, "data.val", "test", base_dir);

  const json* train = top.find("train");
  if (!train) throw ConfigError("train", "required");
  ObjectReader train_reader(*train, "train", kTrainKeys);
  m.max_steps = read_integer(train_reader, "max_steps", Sign::Positive, std::nullopt);
  m.batch_size = read_integer(train_reader, "batch_size", Sign::Positive, 64);
  m.minibatch_size = read_integer(train_reader, "minibatch_size", Sign::Positive, m.batch_size);
  if (m.batch_size % m.minibatch_size != 0) {
    throw ConfigError("train.minibatch_size", "must divide train.batch_size (" + std::to_string(m.batch_size) +
                                                  ") exactly, got " + std::to_string(m.minibatch_size));
  }

  const json* eval = top.find("eval");
  ObjectReader eval_reader(eval ? *eval : empty_object(), "eval", kEvalKeys);
  m.eval_interval = read_integer(eval_reader, "interval", Sign::NonNegative, 100);
  m.eval_size = read_integer(eval_reader, "size", Sign::NonNegative, 1024);
  m.eval_batch_size = read_integer(eval_reader, "batch_size", Sign::Positive, m.minibatch_size);
  if (const json* target = eval_reader.find("target_loss")) {
    if (!target->is_number() || !std::isfinite(target->get<double>()))
      throw ConfigError("eval.target_loss", "expected a number (a validation loss), got " + describe(*target));
    m.target_loss = target->get<double>();
  }
  // Without validation data there is nothing to evaluate; the resolved
  // manifest says so rather than promising evaluations that never come.
  if (!m.val_data) m.eval_size = 0;
  if (m.target_loss && m.eval_size == 0)
    throw ConfigError("eval.target_loss", "needs evaluation: set data.val and a positive eval.size");

  json network_out, compute_out;
  m.network = read_network(top.find("network"), m.nodes, network_out);
  m.compute = read_compute(top.find("compute"), m.nodes, compute_out);

  const json* output = top.find("output");
  ObjectReader output_reader(output ? *output : empty_object(), "output", kOutputKeys);
  m.output_dir = resolve_path(base_dir, read_string(output_reader, "dir", std::string("runs")));
  m.save_model = read_bool(output_reader, "save_model", true);

  json data_out = {{"train", data_json(m.train_data)}};
  if (m.val_data) data_out["val"] = data_json(*m.val_data);
  m.resolved = {
      {"name", m.name},
      {"seed", m.seed},
      {"nodes", m.nodes},
      {"device", m.device},
      {"parallelism", m.parallelism},
      {"threads", m.threads},
      {"pin_threads", m.pin_threads},
      {"model", plugin_json(m.model)},
      {"strategy", plugin_json(m.strategy)},
      {"data", data_out},
      {"train", {{"max_steps", m.max_steps}, {"batch_size", m.batch_size}, {"minibatch_size", m.minibatch_size}}},
      {"eval", {{"interval", m.eval_interval}, {"size", m.eval_size}, {"batch_size", m.eval_batch_size}}},
      {"network", network_out},
      {"compute", compute_out},
      {"output", {{"dir", m.output_dir.string()}, {"save_model", m.save_model}}},
  };
  if (m.target_loss) m.resolved["eval"]["target_loss"] = *m.target_loss;
  return m;
}

// Whether a merge patch sets the value at a dotted JSON path (or deletes it
// with null), i.e. whether an error there is the variant's doing.
bool patch_sets(const json& patch, const std::string& path) {
  const json* current = &patch;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!current->is_object()) return false;
    auto it = current->find(part);
    if (it == current->end()) return false;
    current = &*it;
  }
  return true;
}

// A variant named after its strategy reads well in the summary ("ddp",
// "diloco"); a plugin given as a file is named after the file.
std::string default_variant_name(const json& entry, size_t index) {
  auto strategy = entry.find("strategy");
  if (strategy != entry.end() && strategy->is_object()) {
    auto plugin = strategy->find("plugin");
    if (plugin != strategy->end() && plugin->is_string() && !plugin->get<std::string>().empty()) {
      std::string name = plugin->get<std::string>();
      const bool is_file =
          name.find('/') != std::string::npos || (name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0);
      if (!is_file) return name;
      name = fs::path(name).stem().string();
      const std::string prefix = "exogym_strategy_";
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) name = name.substr(prefix.size());
      return name;
    }
  }
  return "run" + std::to_string(index);
}

std::string entry_path(size_t index) { return "runs[" + std::to_string(index) + "]"; }

// nlohmann keeps the last of two equal keys silently; a manifest that sets
// "nodes" twice is a mistake to report, naming the key's JSON path.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        enter_element();
        stack_.push_back({true, {}, {}, -1});
        break;
      case json::parse_event_t::array_start:
        enter_element();
        stack_.push_back({false, {}, {}, -1});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack_.empty()) stack_.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& top = stack_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) {
          throw ConfigError(current_path(), "duplicate key (JSON would keep only the last value)");
        }
        break;
      }
      case json::parse_event_t::value:
        enter_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    long index;
  };

  void enter_element() {
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
  }

  std::string current_path() const {
    std::string path;
    for (const auto& frame : stack_) {
      path = frame.is_object ? join_path(path, frame.key) : path + "[" + std::to_string(frame.index) + "]";
    }
    return path;
  }

  std::vector<Frame> stack_;
};

// nlohmann reports a byte offset (1-based, pointing at the last character
// read); users want the line and column their editor shows.
std::string syntax_error_message(const fs::path& file, const std::string& text, const json::parse_error& error) {
  const size_t offset = std::min<size_t>(error.byte > 0 ? error.byte - 1 : 0, text.size());
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  size_t column = offset + 1;
  if (offset > 0) {
    const size_t newline = text.rfind('\n', offset - 1);
    if (newline != std::string::npos) column = offset - newline;
  }
  // Keep nlohmann's description ("syntax error while parsing object - ...")
  // and drop its own "[json.exception...] parse error at ...:" prefix.
  std::string detail = error.what();
  const size_t parse_error = detail.find("parse error");
  if (parse_error != std::string::npos) {
    const size_t colon = detail.find(": ", parse_error);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
  }
  return "invalid JSON in manifest " + json_quoted(file.string()) + " at line " + std::to_string(line) + ", column " +
         std::to_string(column) + ": " + detail;
}

fs::path absolute_dir(const fs::path& dir) {
  fs::path out = dir.empty() ? fs::current_path() : fs::absolute(dir);
  out = out.lexically_normal();
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out;
}

}  // namespace

fs::path Manifest::run_dir() const { return variant.empty() ? output_dir / name : output_dir / name / variant; }

void apply_override(json& doc, const std::string& assignment) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    throw ConfigError("--set", "expected key=value (e.g. train.max_steps=100), got " + json_quoted(assignment));
  }
  const std::string key = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  if (key.empty())
    throw ConfigError("--set", "expected key=value with a non-empty key, got " + json_quoted(assignment));

  std::vector<std::string> parts;
  std::stringstream stream(key);
  std::string part;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  if (key.back() == '.' || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    throw ConfigError("--set", "empty component in key " + json_quoted(key));
  }
  // An override applies to the base and to every variant alike; editing the
  // variant list itself from the command line would be ambiguous.
  if (parts.front() == "runs") {
    throw ConfigError("--set", "cannot override " + json_quoted(key) +
                                   ": overrides already apply to every variant; edit \"runs\" in the manifest");
  }

  const json value = json::accept(text) ? json::parse(text) : json(text);
  if (doc.is_null()) doc = json::object();
  if (!doc.is_object())
    throw ConfigError("--set", "cannot set " + json_quoted(key) + ": the manifest is not an object");
  json* current = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked = join_path(walked, parts[i]);
    json& next = (*current)[parts[i]];
    if (next.is_null()) next = json::object();
    if (!next.is_object()) {
      throw ConfigError("--set",
                        "cannot set " + json_quoted(key) + ": " + walked + " is " + describe(next) + ", not an object");
    }
    current = &next;
  }
  (*current)[parts.back()] = value;
}

ManifestSet parse_manifest(const json& json_doc, const fs::path& base_dir, const std::string& default_name,
                           const std::vector<std::string>& overrides) {
  if (!json_doc.is_object()) throw ConfigError("", "a manifest must be a JSON object, got " + describe(json_doc));
  const fs::path dir = absolute_dir(base_dir);
  json base = json_doc;
  for (const auto& assignment : overrides) apply_override(base, assignment);

  ManifestSet set;
  auto runs_it = base.find("runs");
  if (runs_it == base.end() || runs_it->is_null()) {
    base.erase("runs");
    set.runs.push_back(build_manifest(base, dir, default_name, ""));
    set.name = set.runs.front().name;
    return set;
  }

  const json runs = *runs_it;
  base.erase("runs");
  if (!runs.is_array()) throw ConfigError("runs", "expected an array of partial manifests, got " + describe(runs));
  if (runs.empty()) throw ConfigError("runs", "expected at least one variant, got []");
  set.has_variants = true;

  // Names first: a duplicate is reported as such, before whatever else may be
  // wrong inside the variants.
  std::vector<std::string> names;
  std::vector<json> patches;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& entry = runs[i];
    const std::string path = entry_path(i);
    if (!entry.is_object()) throw ConfigError(path, "expected an object (a partial manifest), got " + describe(entry));
    if (entry.contains("runs")) throw ConfigError(path + ".runs", "a variant cannot have variants of its own");

    std::string name;
    auto given = entry.find("name");
    if (given != entry.end() && !given->is_null()) {
      if (!given->is_string() || !is_safe_folder_name(given->get<std::string>())) {
        throw ConfigError(path + ".name",
                          std::string("expected a folder name (") + kSafeNameRule + "), got " + describe(*given));
      }
      name = given->get<std::string>();
    } else {
      name = default_variant_name(entry, i);
      if (!is_safe_folder_name(name)) {
        throw ConfigError(path + ".name", "not set, and the default " + json_quoted(name) + " is not a folder name (" +
                                              kSafeNameRule + "); set \"name\"");
      }
    }
    auto same = std::find(names.begin(), names.end(), name);
    if (same != names.end()) {
      throw ConfigError(path + ".name", "duplicate variant name " + json_quoted(name) + " (" +
                                            entry_path(static_cast<size_t>(same - names.begin())) +
                                            " has it too); give each variant a distinct \"name\"");
    }
    names.push_back(name);
    // All variants of one manifest share one folder: <output.dir>/<name>.
    for (const char* shared : {"output"}) {
      if (entry.contains(shared)) {
        throw ConfigError(path + "." + shared, "cannot differ between variants; set it in the base manifest");
      }
    }
    // "name" in a variant names the variant, not the run: it is not patched in.
    json patch = entry;
    patch.erase("name");
    patches.push_back(std::move(patch));
  }

  for (size_t i = 0; i < patches.size(); ++i) {
    json merged = base;
    // A variant that switches to another plugin starts from that plugin's
    // defaults: the base's options belong to the base's plugin (DiLoCo's "H"
    // would be an unknown option for allreduce).
    for (const char* section : {"model", "strategy"}) {
      const json& patch_section = patches[i].contains(section) ? patches[i][section] : json();
      if (patch_section.is_object() && patch_section.contains("plugin") && merged.contains(section) &&
          merged[section].is_object() && merged[section].value("plugin", json()) != patch_section["plugin"]) {
        merged[section].erase("options");
      }
    }
    merged.merge_patch(patches[i]);
    // Again after the merge, so that --set wins over the variant's values.
    for (const auto& assignment : overrides) apply_override(merged, assignment);
    try {
      set.runs.push_back(build_manifest(merged, dir, default_name, names[i]));
    } catch (const ConfigError& error) {
      if (!error.path().empty() && patch_sets(patches[i], error.path())) {
        throw ConfigError(entry_path(i) + "." + error.path(), error.message());
      }
      // The fault is in the base (or the combination): keep the base's path
      // and say which variant exposed it.
      throw ConfigError(error.path(),
                        error.message() + " (in variant " + json_quoted(names[i]) + ", " + entry_path(i) + ")");
    }
  }
  set.name = set.runs.front().name;
  return set;
}

ManifestSet load_manifest(const fs::path& file, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!fs::exists(file, ec)) throw ConfigError("", "manifest file " + json_quoted(file.string()) + " does not exist");
  if (fs::is_directory(file, ec))
    throw ConfigError("", "manifest " + json_quoted(file.string()) + " is a directory, not a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("", "cannot read manifest " + json_quoted(file.string()) + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    throw ConfigError("", "cannot read manifest " + json_quoted(file.string()) + ": " + std::strerror(errno));
  const std::string text = buffer.str();

  json doc;
  try {
    // Comments are allowed: a manifest is hand-written and worth annotating.
    doc = json::parse(text, DuplicateKeyCheck(), /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& error) {
    throw ConfigError("", syntax_error_message(file, text, error));
  }
  return parse_manifest(doc, absolute_dir(fs::absolute(file).parent_path()), file.stem().string(), overrides);
}

}  // namespace exogym::runtime::manifest
