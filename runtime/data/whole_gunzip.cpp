#include "exogym/runtime/data/whole_gunzip.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <new>

#include "exogym/runtime/data/huge_page_bytes.h"

#ifdef EXOGYM_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace exogym::runtime::data {

#ifdef EXOGYM_HAVE_LIBDEFLATE

namespace {

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

std::optional<at::Tensor> gunzip_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  // The smallest gzip member is 18 bytes (header 10, empty block, trailer 8).
  if (size < 18) return std::nullopt;
  const at::Tensor compressed = huge_page_bytes(size);
  const unsigned char* begin = compressed.data_ptr<uint8_t>();
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(compressed.data_ptr<uint8_t>()), size)) return std::nullopt;
  if (begin[0] != 0x1f || begin[1] != 0x8b) return std::nullopt;

  // The trailer's last field is the decompressed size modulo 2^32: exact for
  // every file under 4 GiB, and libdeflate refuses (INSUFFICIENT_SPACE) when
  // it is not, which sends a larger file to zlib.
  const unsigned char* tail = begin + size - 4;
  const uint32_t inflated_size =
      uint32_t{tail[0]} | (uint32_t{tail[1]} << 8) | (uint32_t{tail[2]} << 16) | (uint32_t{tail[3]} << 24);
  // Deflate shrinks at most 1032:1; a trailer claiming more is damage, which
  // zlib's reader will name, rather than memory to set aside.
  if (inflated_size / 1032 > static_cast<uint64_t>(size)) return std::nullopt;
  at::Tensor out;
  try {
    out = huge_page_bytes(static_cast<int64_t>(inflated_size));
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }

  const std::unique_ptr<libdeflate_decompressor, DecompressorFree> decompressor(libdeflate_alloc_decompressor());
  if (!decompressor) return std::nullopt;
  size_t consumed = 0, produced = 0;
  const libdeflate_result result =
      libdeflate_gzip_decompress_ex(decompressor.get(), begin, static_cast<size_t>(size), out.data_ptr<uint8_t>(),
                                    inflated_size, &consumed, &produced);
  // Several members (a concatenated .gz) or bytes after the member: zlib's
  // reader handles and reports those.
  if (result != LIBDEFLATE_SUCCESS || consumed != static_cast<size_t>(size) || produced != inflated_size) {
    return std::nullopt;
  }
  return out;
}

bool whole_gunzip_available() { return true; }

#else

std::optional<at::Tensor> gunzip_whole_file(const std::filesystem::path&) { return std::nullopt; }

bool whole_gunzip_available() { return false; }

#endif

}  // namespace exogym::runtime::data
