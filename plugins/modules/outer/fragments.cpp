#include "exogym/modules/outer/fragments.h"

#include <algorithm>
#include <numeric>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/name_pattern.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::modules {

namespace {

// How many contiguous groups of at most `limit` elements the tensors need
// (each tensor at most `limit` itself).
int64_t groups_needed(const std::vector<int64_t>& numels, int64_t limit) {
  int64_t groups = 1, size = 0;
  for (int64_t n : numels) {
    if (size + n > limit) {
      ++groups;
      size = 0;
    }
    size += n;
  }
  return groups;
}

}  // namespace

Fragments fragments_by_size(const std::vector<int64_t>& numels, int64_t P, const std::string& json_path) {
  const auto tensors = static_cast<int64_t>(numels.size());
  if (P < 1 || P > tensors) {
    throw sdk::ConfigError(json_path, std::to_string(P) + " fragments, but the model has " + std::to_string(tensors) +
                                          " trainable parameter tensors: a fragment holds at least one tensor");
  }
  // The smallest largest group: binary search on the limit, which the
  // greedy cut meets with the fewest groups.
  int64_t low = *std::max_element(numels.begin(), numels.end());
  int64_t high = std::accumulate(numels.begin(), numels.end(), int64_t{0});
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (groups_needed(numels, mid) <= P) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  // The cut at that limit, closing a group early only where the tensors
  // left are exactly one for each group still to make.
  Fragments fragments(1);
  int64_t size = 0;
  for (int64_t i = 0; i < tensors; ++i) {
    const auto made = static_cast<int64_t>(fragments.size());
    const bool full = size + numels[i] > low;
    const bool one_each = tensors - i == P - made;
    if (!fragments.back().empty() && (full || one_each)) {
      fragments.emplace_back();
      size = 0;
    }
    fragments.back().push_back(static_cast<size_t>(i));
    size += numels[i];
  }
  EXOGYM_CHECK_INTERNAL(static_cast<int64_t>(fragments.size()) == P, "the cut made another number of fragments");
  return fragments;
}

int64_t layer_index(const std::string& name) {
  size_t begin = 0;
  while (begin <= name.size()) {
    size_t end = name.find('.', begin);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(begin, end - begin);
    if (!part.empty() && part.size() <= 9 &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::stoll(part);
    }
    begin = end + 1;
  }
  return -1;
}

Fragments fragments_by_layer_stride(const std::vector<std::string>& names, int64_t P, const std::string& json_path) {
  std::vector<int64_t> layers;  // each tensor's layer index, or -1
  for (const auto& name : names) layers.push_back(layer_index(name));
  std::vector<int64_t> distinct;
  for (int64_t l : layers) {
    if (l >= 0) distinct.push_back(l);
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (P < 1 || P > static_cast<int64_t>(distinct.size())) {
    throw sdk::ConfigError(json_path, std::to_string(P) + " strided fragments, but the parameter names show " +
                                          std::to_string(distinct.size()) +
                                          " numbered layers (a number in the name, as in \"h.3.attn.weight\"): a "
                                          "fragment holds at least one layer; ask for fewer, or for \"contiguous\"");
  }
  const auto fragment_of_layer = [&](int64_t layer) {
    const auto rank = std::lower_bound(distinct.begin(), distinct.end(), layer) - distinct.begin();
    return static_cast<size_t>(rank % P);
  };
  // Before the first layered tensor: the first layer's fragment.
  const auto first = std::find_if(layers.begin(), layers.end(), [](int64_t l) { return l >= 0; });
  size_t current = fragment_of_layer(*first);
  Fragments fragments(static_cast<size_t>(P));
  for (size_t t = 0; t < names.size(); ++t) {
    if (layers[t] >= 0) current = fragment_of_layer(layers[t]);
    fragments[current].push_back(t);
  }
  return fragments;
}

Fragments fragments_by_pattern(const std::vector<std::string>& names, const std::vector<std::string>& patterns,
                               const std::string& json_path) {
  Fragments fragments(patterns.size());
  for (size_t t = 0; t < names.size(); ++t) {
    auto hit =
        std::find_if(patterns.begin(), patterns.end(), [&](const auto& p) { return sdk::glob_match(p, names[t]); });
    if (hit == patterns.end()) {
      throw sdk::ConfigError(json_path, "the parameter \"" + names[t] +
                                            "\" matches no pattern; every trainable parameter must be in a fragment "
                                            "(add a pattern such as \"*\" last)");
    }
    fragments[static_cast<size_t>(hit - patterns.begin())].push_back(t);
  }
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (fragments[i].empty()) {
      std::string known;
      for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
      throw sdk::ConfigError(
          json_path + "[" + std::to_string(i) + "]",
          "the pattern \"" + patterns[i] +
              "\" gets no parameter (each goes to the first pattern it matches); parameters: " + known);
    }
  }
  return fragments;
}

void check_fragments_option(const nlohmann::json& option, const std::string& json_path) {
  const std::string expected =
      "expected a positive integer (the number of fragments), {\"count\": P, \"pattern\": \"contiguous\" or "
      "\"strided\"}, or a non-empty list of parameter name patterns, got ";
  if (option.is_object()) {
    for (const auto& [key, value] : option.items()) {
      if (key != "count" && key != "pattern") {
        throw sdk::ConfigError(json_path + "." + key, "unknown key; expected \"count\" and \"pattern\"");
      }
    }
    if (!option.contains("count") || !option["count"].is_number_integer() || option["count"].get<int64_t>() < 1) {
      throw sdk::ConfigError(json_path + ".count",
                             "expected a positive integer (the number of fragments), got " +
                                 (option.contains("count") ? sdk::json_excerpt(option["count"]) : "nothing"));
    }
    const nlohmann::json pattern = option.value("pattern", nlohmann::json("contiguous"));
    if (pattern != "contiguous" && pattern != "strided") {
      throw sdk::ConfigError(json_path + ".pattern",
                             "expected \"contiguous\" or \"strided\", got " + sdk::json_excerpt(pattern));
    }
    return;
  }
  if (option.is_number_integer()) {
    if (option.get<int64_t>() < 1) throw sdk::ConfigError(json_path, expected + sdk::json_excerpt(option));
    return;
  }
  if (!option.is_array() || option.empty()) throw sdk::ConfigError(json_path, expected + sdk::json_excerpt(option));
  for (size_t i = 0; i < option.size(); ++i) {
    if (!option[i].is_string() || option[i].get<std::string>().empty()) {
      throw sdk::ConfigError(
          json_path + "[" + std::to_string(i) + "]",
          "expected a parameter name pattern (a non-empty string), got " + sdk::json_excerpt(option[i]));
    }
  }
}

Fragments make_fragments(const nlohmann::json& option, const std::vector<std::string>& names,
                         const std::vector<int64_t>& numels, const std::string& json_path) {
  check_fragments_option(option, json_path);
  if (option.is_number_integer()) return fragments_by_size(numels, option.get<int64_t>(), json_path);
  if (option.is_object()) {
    const int64_t count = option["count"].get<int64_t>();
    if (option.value("pattern", "contiguous") == "strided") return fragments_by_layer_stride(names, count, json_path);
    return fragments_by_size(numels, count, json_path);
  }
  return fragments_by_pattern(names, option.get<std::vector<std::string>>(), json_path);
}

}  // namespace exogym::modules
