#pragma once
// The layout of a safetensors file (huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range (plus "__metadata__", strings only), then the raw
// little-endian data. Parsing it is shared by the readers that copy the data
// (output/safetensors.h: checkpoints, model files) and the one that maps it
// (data/tensors_dataset.h).
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace exogym::runtime::util {

struct SafetensorsEntry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // the data's byte range, from data_offset
};

struct SafetensorsLayout {
  std::vector<SafetensorsEntry> entries;  // in the order of their data, as written
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data starts in the file
};

// The layout of the `size` bytes at `bytes` (a whole file). A file that is
// not valid safetensors (truncated, a header that is not JSON, an unknown
// dtype, a range outside the file or that does not match its shape) is an
// sdk::DataError naming `file` and what is wrong; no entry's size overflows.
SafetensorsLayout parse_safetensors(const unsigned char* bytes, size_t size, const std::string& file);

}  // namespace exogym::runtime::util
