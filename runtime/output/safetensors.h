#pragma once
// The safetensors format (huggingface/safetensors), which most tools read
// today: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range (plus "__metadata__", strings only),
// padded with spaces to a multiple of 8 bytes, then the raw little-endian
// data. Nothing in it is executed on loading.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace exogym::runtime::output {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;  // in the file's order of data
  std::map<std::string, std::string> metadata;
};

// The file's bytes; tensors are stored in the order given (moved to the CPU,
// made contiguous). Names must be unique and not "__metadata__".
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

// Writes the file atomically (see atomic_file.h).
void write_safetensors(const std::filesystem::path& file, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads a file this or any other safetensors writer made. A file that is not
// valid safetensors (truncated, overlapping ranges, unknown dtype) is an
// sdk::DataError naming the file and what is wrong.
SafetensorsFile read_safetensors(const std::filesystem::path& file);

}  // namespace exogym::runtime::output
