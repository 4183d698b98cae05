#include "exogym/runtime/util/safetensors_layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "exogym/runtime/util/tensor_dtypes.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::util {

namespace {

uint64_t get_u64_le(const unsigned char* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

}  // namespace

SafetensorsLayout parse_safetensors(const unsigned char* bytes, size_t size, const std::string& file) {
  const auto bad = [&](const std::string& why) { return sdk::DataError(file + ": not a safetensors file: " + why); };
  if (size < 8) throw bad("shorter than its 8-byte header length");
  const uint64_t header_size = get_u64_le(bytes);
  if (header_size > size - 8) throw bad("the header length exceeds the file");
  nlohmann::json header =
      nlohmann::json::parse(bytes + 8, bytes + 8 + header_size, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) throw bad("the header is not a JSON object");
  SafetensorsLayout layout;
  layout.data_offset = 8 + header_size;
  const uint64_t data_size = size - layout.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad("\"__metadata__\" is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw bad("metadata \"" + key + "\" is not a string");
        layout.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const TensorDtype* dtype = nullptr;
    if (entry.is_object() && entry.contains("dtype") && entry["dtype"].is_string())
      dtype = find_safetensors_dtype(entry["dtype"].get<std::string>().c_str());
    if (!dtype) throw bad("tensor \"" + name + "\" has no dtype this reader knows");
    const auto& shape = entry.value("shape", nlohmann::json());
    const auto& range = entry.value("data_offsets", nlohmann::json());
    if (!shape.is_array() || !range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
        !range[1].is_number_unsigned()) {
      throw bad("tensor \"" + name + "\" has no valid shape and data_offsets");
    }
    SafetensorsEntry e{name, dtype->type, {}, range[0].get<uint64_t>(), range[1].get<uint64_t>()};
    uint64_t expected = c10::elementSize(dtype->type);  // bytes, checked for overflow before anything is allocated
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() || __builtin_mul_overflow(expected, d.get<uint64_t>(), &expected) ||
          d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        throw bad("bad shape of \"" + name + "\"");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    if (e.begin > e.end || e.end > data_size || e.end - e.begin != expected) {
      throw bad("the data of \"" + name + "\" lies outside the file or does not match its shape");
    }
    layout.entries.push_back(std::move(e));
  }
  // The header is a JSON object (its keys come back sorted): list the
  // tensors in the order of their data, as they were written.
  std::stable_sort(layout.entries.begin(), layout.entries.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  return layout;
}

}  // namespace exogym::runtime::util
