#pragma once
// Inflating a whole .gz file in one call, with libdeflate when the build has
// it: about three times faster than zlib's stream, which is most of the time
// MNIST takes to load.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <optional>

namespace exogym::runtime::data {

// The decompressed bytes of `file` as a uint8 tensor, or nullopt when this
// fast path does not apply: the build has no libdeflate, the file is not a
// single well-formed gzip member, or it cannot be read. Never throws for a
// bad file: the caller then reads it with zlib's stream, which says exactly
// what is wrong with it.
std::optional<at::Tensor> gunzip_whole_file(const std::filesystem::path& file);

// Whether this build has the fast path (libdeflate was found at build time).
bool whole_gunzip_available();

}  // namespace exogym::runtime::data
