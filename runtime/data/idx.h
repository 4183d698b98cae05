#pragma once
// Reader for the IDX format (the one MNIST ships in), plain or gzip-compressed.
#include <ATen/core/Tensor.h>

#include <filesystem>

namespace exogym::runtime::data {

// Reads an IDX file into a uint8 tensor shaped by the header's dimensions
// (e.g. [60000, 28, 28] for MNIST training images). A .gz file is
// decompressed on the fly; a plain file is read as is (zlib handles both).
// Only element type 0x08 (unsigned byte) is supported. Throws sdk::DataError
// naming the file for a missing file, a bad magic number, an unsupported
// element type, a truncated file or trailing bytes after the data.
at::Tensor read_idx(const std::filesystem::path& file);

}  // namespace exogym::runtime::data
