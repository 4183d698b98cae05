#include "exogym/modules/compression/elias_fano.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

int low_bits(int64_t length, int64_t kept) {
  int l = 0;
  while (kept > 0 && (kept << (l + 1)) <= length) ++l;
  return l;
}

class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  void put(uint64_t value, int bits) {
    for (int b = 0; b < bits; ++b, ++at_) {
      if ((value >> b) & 1u) out_[at_ >> 3] |= static_cast<uint8_t>(1u << (at_ & 7));
    }
  }
  void set(int64_t bit) { out_[(at_ + bit) >> 3] |= static_cast<uint8_t>(1u << ((at_ + bit) & 7)); }
  void skip(int64_t bits) { at_ += bits; }

 private:
  uint8_t* out_;
  int64_t at_ = 0;
};

class BitReader {
 public:
  explicit BitReader(const uint8_t* in) : in_(in) {}
  uint64_t get(int bits) {
    uint64_t value = 0;
    for (int b = 0; b < bits; ++b, ++at_) value |= static_cast<uint64_t>((in_[at_ >> 3] >> (at_ & 7)) & 1u) << b;
    return value;
  }
  bool bit() {
    const bool set = ((in_[at_ >> 3] >> (at_ & 7)) & 1u) != 0;
    ++at_;
    return set;
  }

 private:
  const uint8_t* in_;
  int64_t at_ = 0;
};

[[noreturn]] void bad_code(int64_t c, const std::string& what) {
  throw sdk::Error("Elias-Fano offsets: chunk " + std::to_string(c) + " " + what);
}

}  // namespace

int64_t elias_fano_bits(int64_t length, int64_t kept) {
  if (length <= 0) return 0;
  const int l = low_bits(length, kept);
  return kept * l + kept + ((length - 1) >> l) + 1;
}

int64_t elias_fano_bytes(int64_t numel, int64_t chunk, double density) {
  const int64_t full = numel / chunk, rest = numel % chunk;
  const int64_t bits = full * elias_fano_bits(chunk, topk_per_chunk(chunk, density)) +
                       elias_fano_bits(rest, topk_per_chunk(rest, density));
  return (bits + 7) / 8;
}

at::Tensor elias_fano_encode(const at::Tensor& offsets, int64_t numel, int64_t chunk, double density) {
  const int64_t count = topk_count(numel, chunk, density), k = topk_per_chunk(chunk, density);
  EXOGYM_CHECK_INTERNAL(offsets.dim() == 1 && offsets.numel() == count, "elias_fano_encode: offsets of another size");
  const at::Tensor in = offsets.to(at::kCPU, at::kLong).contiguous();
  const int64_t* o = in.data_ptr<int64_t>();
  at::Tensor code = at::zeros({elias_fano_bytes(numel, chunk, density)}, at::kByte);
  BitWriter out(code.data_ptr<uint8_t>());
  const int64_t chunks = chunk_count(numel, chunk);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t length = std::min(chunk, numel - c * chunk), kept = topk_per_chunk(length, density);
    const int l = low_bits(length, kept);
    const int64_t* first = o + c * k;
    for (int64_t j = 0; j < kept; ++j) out.put(static_cast<uint64_t>(first[j]), l);
    for (int64_t j = 0; j < kept; ++j) out.set((first[j] >> l) + j);
    out.skip(kept + ((length - 1) >> l) + 1);
  }
  return code;
}

at::Tensor elias_fano_decode(const at::Tensor& code, int64_t numel, int64_t chunk, double density) {
  const int64_t bytes = elias_fano_bytes(numel, chunk, density);
  if (!code.defined() || code.dim() != 1 || code.scalar_type() != at::kByte || code.numel() != bytes) {
    throw sdk::Error("Elias-Fano offsets: expected " + std::to_string(bytes) + " bytes (uint8) for " +
                     std::to_string(numel) + " values in chunks of " + std::to_string(chunk));
  }
  const at::Tensor in = code.to(at::kCPU).contiguous();
  const int64_t count = topk_count(numel, chunk, density), k = topk_per_chunk(chunk, density);
  at::Tensor offsets = at::empty({count}, at::kInt);
  int32_t* out = offsets.data_ptr<int32_t>();
  BitReader bits(in.data_ptr<uint8_t>());
  const int64_t chunks = chunk_count(numel, chunk);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t length = std::min(chunk, numel - c * chunk), kept = topk_per_chunk(length, density);
    const int l = low_bits(length, kept);
    int32_t* first = out + c * k;
    for (int64_t j = 0; j < kept; ++j) first[j] = static_cast<int32_t>(bits.get(l));
    const int64_t high_bits = kept + ((length - 1) >> l) + 1;
    int64_t j = 0;
    for (int64_t b = 0; b < high_bits; ++b) {
      if (!bits.bit()) continue;
      if (j == kept) bad_code(c, "has more than " + std::to_string(kept) + " offsets");
      const int64_t offset = ((b - j) << l) | first[j];
      if (offset >= length)
        bad_code(c, "has offset " + std::to_string(offset) + " outside its " + std::to_string(length) + " values");
      if (j > 0 && offset <= first[j - 1]) bad_code(c, "has offsets out of ascending order");
      first[j++] = static_cast<int32_t>(offset);
    }
    if (j != kept) bad_code(c, "has " + std::to_string(j) + " offsets, not " + std::to_string(kept));
  }
  // The padding of the last byte is zero in a code this library wrote.
  return offsets;
}

}  // namespace exogym::modules
