#pragma once
// Reader for the IDX format (the one MNIST ships in), plain or gzip-compressed.
#include <ATen/core/Tensor.h>

#include <filesystem>

namespace exogym::runtime::data {

// Reads an IDX file into a uint8 tensor shaped by the header's dimensions
// (e.g. [60000, 28, 28] for MNIST training images). A well-formed .gz file
// is inflated whole (whole_gunzip.h); anything else streams through zlib,
// which reads plain files as they are and says what is wrong with bad ones.
// Only element type 0x08 (unsigned byte) is supported. Throws sdk::DataError
// naming the file for a missing file or one that is not a regular file, a bad
// magic number, an unsupported element type, a truncated file or trailing
// bytes after the data.
at::Tensor read_idx(const std::filesystem::path& file);

}  // namespace exogym::runtime::data
