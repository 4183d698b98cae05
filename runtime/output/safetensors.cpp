#include "exogym/runtime/output/safetensors.h"

#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/runtime/util/safetensors_layout.h"
#include "exogym/runtime/util/tensor_dtypes.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

namespace fs = std::filesystem;

namespace {

const char* dtype_name(at::ScalarType type, const std::string& tensor) {
  if (const util::TensorDtype* dtype = util::find_dtype(type)) return dtype->safetensors;
  throw sdk::Error("safetensors: tensor \"" + tensor + "\" has dtype " + std::string(c10::toString(type)) +
                   ", which the format cannot store");
}

void put_u64_le(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The format is little-endian; so is every machine LibTorch runs on today.
bool machine_is_little_endian() {
  const uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

}  // namespace

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  EXOGYM_CHECK_INTERNAL(machine_is_little_endian(), "safetensors: this machine is not little-endian");
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
  // A regular file only: a FIFO in a checkpoint would block the resume.
  const std::string bytes = util::read_regular_file(file);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const util::SafetensorsLayout layout = util::parse_safetensors(data, bytes.size(), file.string());
  SafetensorsFile result;
  result.metadata = layout.metadata;
  for (const util::SafetensorsEntry& e : layout.entries) {
    at::Tensor tensor = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    std::memcpy(tensor.data_ptr(), data + layout.data_offset + e.begin, e.end - e.begin);
    result.tensors.emplace_back(e.name, std::move(tensor));
  }
  return result;
}

}  // namespace exogym::runtime::output
