#include "exogym/runtime/data/idx.h"

#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "exogym/runtime/data/huge_page_bytes.h"
#include "exogym/runtime/data/whole_gunzip.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {
namespace {

using sdk::DataError;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

const char* idx_type_name(int type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "short";
    case 0x0C:
      return "int";
    case 0x0D:
      return "float";
    case 0x0E:
      return "double";
    default:
      return nullptr;
  }
}

// Reads up to `size` bytes; fewer only at the end of the (decompressed)
// stream. gzread takes an unsigned int, so large payloads go in chunks.
int64_t read_some(gzFile file, void* buffer, int64_t size, const std::filesystem::path& path) {
  auto* out = static_cast<unsigned char*>(buffer);
  int64_t done = 0;
  constexpr int64_t kChunk = int64_t{1} << 30;
  while (done < size) {
    const auto want = static_cast<unsigned>(std::min(size - done, kChunk));
    const int got = gzread(file, out + done, want);
    if (got < 0) {
      int errnum = Z_OK;
      const char* message = gzerror(file, &errnum);
      throw DataError(path.string() + ": cannot read: " +
                      (errnum == Z_ERRNO ? std::generic_category().message(errno) : std::string(message)));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

// A truncated gzip stream is reported by gzerror as Z_BUF_ERROR after a short
// read; worth saying, since the fix (re-download) differs from a bad header.
std::string gzip_note(gzFile file) {
  int errnum = Z_OK;
  gzerror(file, &errnum);
  return errnum == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
}

uint32_t big_endian32(const unsigned char* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

// The data of a whole, well-formed IDX file of bytes held in memory, shaped
// by its header, as a view of `bytes` (no copy); nullopt for anything else,
// which the streaming reader then reads and reports.
std::optional<at::Tensor> view_well_formed(const at::Tensor& bytes) {
  const int64_t size = bytes.numel();
  const unsigned char* data = bytes.data_ptr<uint8_t>();
  if (size < 4 || data[0] != 0 || data[1] != 0 || data[2] != 0x08 || data[3] == 0) return std::nullopt;
  const int ndims = data[3];
  const int64_t header = 4 + 4 * int64_t{ndims};
  if (size < header) return std::nullopt;
  std::vector<int64_t> sizes(static_cast<size_t>(ndims));
  int64_t payload = 1;
  for (int d = 0; d < ndims; ++d) {
    sizes[d] = big_endian32(data + 4 + 4 * d);
    if (sizes[d] != 0 && payload > (size - header) / sizes[d]) return std::nullopt;  // more than the file holds
    payload *= sizes[d];
  }
  if (header + payload != size) return std::nullopt;
  return bytes.narrow(0, header, payload).view(sizes);
}

}  // namespace

at::Tensor read_idx(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw DataError(path.string() + ": no such file");
  if (std::filesystem::is_directory(path, error))
    throw DataError(path.string() + ": is a folder, expected an IDX file");
  // Checked before opening: opening a FIFO would wait for a writer forever.
  if (!std::filesystem::is_regular_file(path, error)) throw DataError(path.string() + ": not a regular file");

  // Most files are well-formed .gz files: inflated whole, then viewed.
  if (const auto whole = gunzip_whole_file(path)) {
    if (auto tensor = view_well_formed(*whole)) return *tensor;
  }

  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(path.string() + ": cannot open: " + std::generic_category().message(errno));
  // The default 8 KiB buffer makes decompressing 47 MB of MNIST images
  // noticeably slower than a larger one.
  gzbuffer(file.get(), 1 << 20);

  std::array<unsigned char, 4> magic_bytes{};
  const int64_t magic_read = read_some(file.get(), magic_bytes.data(), 4, path);
  const uint32_t magic = magic_read == 4 ? big_endian32(magic_bytes.data()) : 0;
  const int type = magic_bytes[2];
  const int ndims = magic_bytes[3];
  // IDX magic: two zero bytes, the element type, the number of dimensions.
  if (magic_read < 4 || magic_bytes[0] != 0 || magic_bytes[1] != 0 || idx_type_name(type) == nullptr || ndims == 0) {
    // A .gz cut before its first decompressed bytes reads as an empty file:
    // say that the compressed file is what is short.
    if (magic_read < 4 && !gzip_note(file.get()).empty()) {
      throw DataError(path.string() + ": truncated: the gzip stream ends after " + std::to_string(magic_read) +
                      " bytes of data (an incomplete download? fetch the file again)");
    }
    const std::string got =
        magic_read < 4 ? "a " + std::to_string(magic_read) + "-byte file" : "bad magic " + hex32(magic);
    throw DataError(path.string() + ": " + got + " (expected an IDX file, e.g. 0x00000803 for images)");
  }
  if (type != 0x08) {
    throw DataError(path.string() + ": IDX element type 0x" + hex32(type).substr(8) + " (" + idx_type_name(type) +
                    ") is not supported; only 0x08 (unsigned byte) is");
  }

  std::vector<unsigned char> dim_bytes(static_cast<size_t>(4 * ndims));
  const int64_t dims_read = read_some(file.get(), dim_bytes.data(), 4 * ndims, path);
  if (dims_read < 4 * ndims) {
    throw DataError(path.string() + ": truncated: the header declares " + std::to_string(ndims) + " dimensions (" +
                    std::to_string(4 + 4 * ndims) + " header bytes), file has " + std::to_string(4 + dims_read) +
                    gzip_note(file.get()));
  }
  std::vector<int64_t> sizes(static_cast<size_t>(ndims));
  int64_t payload = 1;
  for (int d = 0; d < ndims; ++d) {
    sizes[d] = big_endian32(dim_bytes.data() + 4 * d);
    // Two 32-bit sizes cannot overflow int64, but three can.
    if (sizes[d] != 0 && payload > std::numeric_limits<int64_t>::max() / sizes[d]) {
      throw DataError(path.string() + ": the header's dimensions describe more than 2^63 bytes");
    }
    payload *= sizes[d];
  }

  at::Tensor tensor = huge_page_bytes(payload).view(sizes);
  const int64_t data_read = read_some(file.get(), tensor.data_ptr<uint8_t>(), payload, path);
  if (data_read < payload) {
    throw DataError(path.string() + ": truncated: header says " + std::to_string(payload) +
                    " bytes of data, file has " + std::to_string(data_read) + gzip_note(file.get()));
  }
  // Trailing bytes mean the header and the data disagree (e.g. a file from a
  // different set): refusing beats silently training on half of it.
  int64_t extra = 0;
  std::array<unsigned char, 1 << 16> sink{};
  for (int64_t got; (got = read_some(file.get(), sink.data(), sink.size(), path)) > 0;) extra += got;
  if (extra > 0) {
    throw DataError(path.string() + ": trailing data: header says " + std::to_string(payload) +
                    " bytes of data, file has " + std::to_string(payload + extra));
  }
  return tensor;
}

}  // namespace exogym::runtime::data
