#pragma once
// NumPy's .npy format (numpy.save), read without NumPy: the magic string
// "\x93NUMPY", a version, a little-endian header length, a header that is a
// Python dict literal ({'descr': '<f4', 'fortran_order': False, 'shape':
// (60000, 28, 28), }), then the array's raw bytes in C order. The file is
// memory-mapped, never copied (mapped_file.h): a dataset of many gigabytes
// is read only where examples are drawn.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace exogym::runtime::data {

class MappedFile;

struct NpyArray {
  std::shared_ptr<const MappedFile> file;  // keeps `tensor`'s memory mapped
  // A CPU tensor over the mapped bytes, read only (a view of the file).
  at::Tensor tensor;
  std::string descr;  // NumPy's dtype code, e.g. "<f4"
};

// Maps `file` and reads its header. Throws sdk::DataError naming the file
// and what is wrong: not a .npy file, a version this reader does not know, a
// header that is not the dict numpy.save writes, Fortran order, a dtype
// other than bool, (u)int8, int16/32/64, float16/32/64 (little-endian), or
// data shorter or longer than the shape says.
NpyArray read_npy(const std::filesystem::path& file);

}  // namespace exogym::runtime::data
