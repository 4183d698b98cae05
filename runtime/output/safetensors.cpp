#include "exogym/runtime/output/safetensors.h"

#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "exogym/runtime/output/tensor_dtypes.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

namespace fs = std::filesystem;

namespace {

const char* dtype_name(at::ScalarType type, const std::string& tensor) {
  if (const TensorDtype* dtype = find_dtype(type)) return dtype->safetensors;
  throw sdk::Error("safetensors: tensor \"" + tensor + "\" has dtype " + std::string(c10::toString(type)) +
                   ", which the format cannot store");
}

bool dtype_of(const std::string& name, at::ScalarType& type) {
  const TensorDtype* dtype = find_safetensors_dtype(name.c_str());
  if (dtype) type = dtype->type;
  return dtype != nullptr;
}

void put_u64_le(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_u64_le(const unsigned char* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

// The format is little-endian; so is every machine LibTorch runs on today.
bool little_endian() {
  const uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

}  // namespace

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  EXOGYM_CHECK_INTERNAL(little_endian(), "safetensors: this machine is not little-endian");
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    EXOGYM_CHECK_INTERNAL(name != "__metadata__" && names.insert(name).second,
                          "safetensors: tensor name \"" + name + "\" is reserved or repeated");
    at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const auto bytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", dtype_name(cpu.scalar_type(), name)},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(cpu));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  put_u64_le(out, text.size());
  out += text;
  for (const auto& t : data) out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return out;
}

void write_safetensors(const fs::path& file, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  util::write_file_atomically(file, safetensors_bytes(tensors, metadata));
}

SafetensorsFile read_safetensors(const fs::path& file) {
  const auto bad = [&](const std::string& why) {
    return sdk::DataError(file.string() + ": not a safetensors file: " + why);
  };
  // A regular file only: a FIFO in a checkpoint would block the resume.
  const std::string bytes = util::read_regular_file(file);
  if (bytes.size() < 8) throw bad("shorter than its 8-byte header length");
  const uint64_t header_size = get_u64_le(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (header_size > bytes.size() - 8) throw bad("the header length exceeds the file");
  nlohmann::json header = nlohmann::json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(header_size), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) throw bad("the header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - header_size;
  const char* data = bytes.data() + 8 + header_size;

  SafetensorsFile result;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad("\"__metadata__\" is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw bad("metadata \"" + key + "\" is not a string");
        result.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    at::ScalarType type{};
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !dtype_of(entry["dtype"].get<std::string>(), type)) {
      throw bad("tensor \"" + name + "\" has no dtype this reader knows");
    }
    const auto& shape = entry.value("shape", nlohmann::json());
    const auto& range = entry.value("data_offsets", nlohmann::json());
    if (!shape.is_array() || !range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
        !range[1].is_number_unsigned()) {
      throw bad("tensor \"" + name + "\" has no valid shape and data_offsets");
    }
    std::vector<int64_t> sizes;
    uint64_t expected = c10::elementSize(type);  // bytes, checked for overflow before anything is allocated
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() || __builtin_mul_overflow(expected, d.get<uint64_t>(), &expected)) {
        throw bad("bad shape of \"" + name + "\"");
      }
      sizes.push_back(d.get<int64_t>());
    }
    const uint64_t begin = range[0].get<uint64_t>(), end = range[1].get<uint64_t>();
    if (begin > end || end > data_size || end - begin != expected) {
      throw bad("the data of \"" + name + "\" lies outside the file or does not match its shape");
    }
    at::Tensor tensor = at::empty(sizes, at::TensorOptions().dtype(type));
    std::memcpy(tensor.data_ptr(), data + begin, expected);
    order.emplace_back(begin, name);
    result.tensors.emplace_back(name, std::move(tensor));
  }
  // The header is a JSON object (its keys come back sorted); list the
  // tensors in the order of their data, as they were written.
  std::vector<size_t> index(result.tensors.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = i;
  std::sort(index.begin(), index.end(), [&](size_t a, size_t b) { return order[a] < order[b]; });
  NamedTensors sorted;
  for (size_t i : index) sorted.push_back(std::move(result.tensors[i]));
  result.tensors = std::move(sorted);
  return result;
}

}  // namespace exogym::runtime::output
