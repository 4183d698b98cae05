#pragma once
// Low-bit payloads: a float tensor quantised to 8, 4 or 2 bits per value
// with one scale per block of values, and back (docs/compression.md). What a
// strategy sends instead of fp32 when it compresses: quantized_comm.h
// averages such payloads across nodes, error_feedback.h keeps what
// quantisation lost.
//
// The tensor is read flat, in row-major order (a non-contiguous tensor as
// its contiguous copy), and cut into blocks of `block_size` consecutive
// values; the last block may be shorter. Each block's scale is its largest
// magnitude divided by the format's largest value (absmax / max), an fp32
// number: fp32 rather than bf16 so that a block's largest value maps onto
// the format's largest almost exactly, at 4 bytes per block (0.25 bit per
// value at the default block of 128). A value is divided by its block's
// scale, rounded to the nearest code (ties to even) and saturated at the
// format's largest magnitude; decoding multiplies the code's value by the
// scale. All arithmetic is fp32 on the CPU, the conversions are this
// library's own bit manipulation (LibTorch 1.13 has no float8 dtypes), and
// every value depends on its block only, so the bytes are the same on every
// machine, for any number of threads. The fp8 codes are bit for bit
// LibTorch's float8_e4m3fn and float8_e5m2 casts wherever those do not
// overflow (the tests compare them where LibTorch has the dtypes).
//
// Zeros and non-finite values:
//  - A block of zeros has scale 0 and decodes to zeros (the sign of zero is
//    kept by the fp formats and int2, lost by int8 and int4).
//  - A block holding a NaN or an infinity gets a NaN scale and all-zero
//    codes, so the whole block decodes to NaN: a non-finite input never
//    comes back finite, and the run's divergence check (train.on_nonfinite)
//    still sees it.
//
// Packing: the 8-bit formats store one code per byte, the 4-bit formats two,
// value 2i in the low nibble of byte i and value 2i+1 in its high nibble (an
// odd count leaves the last high nibble 0), int2 four, value 4i+j in bits
// 2j and 2j+1 of byte i (unused bits 0). Int8 and int4 codes are two's
// complement.
//
// int2 has no zero: its levels are ±0.5 and ±1.5 times the scale (absmax /
// 1.5), code bit 1 the sign and bit 0 the magnitude (0: 0.5, 1: 1.5). It is
// made for values that survived a top-k (SparseLoCo, exogym/modules/compression/topk_compressor.h), which
// are the largest of their chunk, so a zero level would waste one of four
// codes. A magnitude up to 1 (times the scale) rounds to 0.5, above it to
// 1.5 (the tie at 1 goes to 0.5, the even one of m + 1/2); a zero becomes
// ±0.5 by its sign bit, in a block whose scale is not 0.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace exogym::sdk {

enum class QuantFormat {
  Fp8E4M3,  // fp8 e4m3 "fn": no infinities, 0x7F/0xFF are NaN, max 448
  Fp8E5M2,  // fp8 e5m2: IEEE-like, max 57344
  Fp4E2M1,  // fp4 e2m1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
  Int8,     // symmetric: -127 ... 127 (-128 unused)
  Int4,     // symmetric: -7 ... 7 (-8 unused)
  Int2,     // -1.5, -0.5, 0.5, 1.5: no zero (above)
};

// The block size when a caller does not choose one: 128 values per fp32
// scale, so that fp4 sends 68 bytes per 512 of fp32 (7.5 times fewer).
constexpr int64_t kDefaultQuantBlock = 128;

// Names, as options spell them: "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8",
// "int4", "int2". quant_format_from_name also takes "fp8" (e4m3, the fp8 that
// Streaming DiLoCo and torchft send) and "fp4" (e2m1); it throws
// ConfigError at `json_path` for any other name, suggesting the closest.
const char* to_string(QuantFormat format);
std::vector<std::string> quant_format_names();  // the names above, aliases included
QuantFormat quant_format_from_name(const std::string& name, const std::string& json_path);

int quant_bits(QuantFormat format);                       // 8, 4 or 2
float quant_max(QuantFormat format);                      // the largest magnitude: 448, 57344, 6, 127, 7, 1.5
int64_t packed_bytes(QuantFormat format, int64_t numel);  // ceil(numel * bits / 8)
int64_t scale_count(int64_t numel, int64_t block_size);   // ceil(numel / block_size)
// Exactly what a payload of `numel` values holds: packed bytes + 4 bytes per scale.
int64_t quantized_bytes(QuantFormat format, int64_t numel, int64_t block_size = kDefaultQuantBlock);

// One value's code (in the low bits; 4-bit formats use 0..15, int2 0..3) and back,
// without a scale. Finite values round to the nearest code, ties to even,
// and saturate at ±quant_max (infinities too). NaN encodes as the fp8
// formats' NaN (0x7F, with the input's sign) and as 0 in the formats
// without one: quantize() never passes it one. decode_value of an fp8 NaN
// code is NaN, of e5m2's 0x7C/0xFC ±infinity.
uint8_t encode_value(QuantFormat format, float value);
float decode_value(QuantFormat format, uint8_t code);

// A quantised tensor: what is sent (codes and scales) and what every node
// knows without sending it (format, block size, shape, dtype, device).
struct QuantizedPayload {
  QuantFormat format = QuantFormat::Fp8E4M3;
  int64_t block_size = kDefaultQuantBlock;
  std::vector<int64_t> shape;         // the original tensor's
  at::ScalarType dtype = at::kFloat;  // the original tensor's; dequantize returns it
  at::Device device = at::kCPU;       // likewise
  at::Tensor codes;                   // uint8, 1-D, packed_bytes(format, numel()), on the CPU
  at::Tensor scales;                  // float32, 1-D, scale_count(numel(), block_size), on the CPU

  int64_t numel() const;
  // codes' bytes + scales' bytes: exactly what the collectives count.
  int64_t payload_bytes() const;
};

// Quantises a floating-point tensor (fp32, fp64, fp16 or bf16, any device;
// converted to fp32 first). Throws sdk::Error for another dtype or a block
// size below 1.
QuantizedPayload quantize(const at::Tensor& tensor, QuantFormat format, int64_t block_size = kDefaultQuantBlock);

// The payload's values: payload.shape, payload.dtype, on payload.device.
// Throws sdk::Error when codes or scales do not have the sizes the payload's
// format, shape and block size call for (a payload received from elsewhere).
at::Tensor dequantize(const QuantizedPayload& payload);
// The same values as fp32 on the CPU, before the conversion to the
// payload's dtype (for accumulating several payloads).
at::Tensor dequantize_float(const QuantizedPayload& payload);

}  // namespace exogym::sdk
