#include "exogym/sdk/quantize.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "exogym/sdk/error.h"

namespace exogym::sdk {

namespace {

// A minifloat: sign, `exp_bits` exponent bits biased by `bias`, `man_bits`
// mantissa bits, subnormals at the smallest exponent. `max_code` is the
// largest finite magnitude's code; `nan_code` the NaN a NaN encodes to
// (0: the format has none).
struct MiniFloat {
  int exp_bits, man_bits, bias;
  uint32_t max_code;
  uint8_t nan_code;
  // e4m3 "fn" spends only the all-ones code on NaN; e5m2 reserves its top
  // exponent for infinities and NaNs as IEEE formats do.
  bool ieee_top_exponent;
};

constexpr MiniFloat kE4M3{4, 3, 7, 0x7E, 0x7F, false};
constexpr MiniFloat kE5M2{5, 2, 15, 0x7B, 0x7F, true};
constexpr MiniFloat kE2M1{2, 1, 1, 0x7, 0, false};

const MiniFloat* minifloat(QuantFormat format) {
  switch (format) {
    case QuantFormat::Fp8E4M3:
      return &kE4M3;
    case QuantFormat::Fp8E5M2:
      return &kE5M2;
    case QuantFormat::Fp4E2M1:
      return &kE2M1;
    default:
      return nullptr;
  }
}

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

constexpr uint32_t kInfBits = 0x7F800000;
constexpr uint32_t kHuge = 1u << 31;  // above every format's largest code

// RNE(|x| / 2^quantum_exp) for the magnitude bits of a finite fp32, in
// integers so that no floating-point environment can change it. Capped at
// kHuge. An fp32 subnormal gives 0: it lies below half the smallest quantum
// any format here uses (2^-18).
uint32_t round_to_quantum(uint32_t abs_bits, int quantum_exp) {
  const int field = static_cast<int>(abs_bits >> 23);
  if (field == 0) return 0;
  const uint32_t significand = (abs_bits & 0x7FFFFF) | 0x800000;  // the value is significand * 2^(field-150)
  const int shift = quantum_exp - (field - 150);                  // value / 2^quantum_exp = significand / 2^shift
  if (shift <= 0) return shift <= -7 ? kHuge : significand << -shift;
  if (shift > 25) return 0;  // below half a quantum
  const uint32_t whole = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
  return whole + ((rest > half || (rest == half && (whole & 1))) ? 1 : 0);
}

uint8_t encode_minifloat(const MiniFloat& f, float value) {
  const uint32_t bits = float_bits(value), magnitude = bits & 0x7FFFFFFF;
  const auto sign = static_cast<uint8_t>((bits >> 31) << (f.exp_bits + f.man_bits));
  if (magnitude > kInfBits) return f.nan_code == 0 ? 0 : static_cast<uint8_t>(f.nan_code | sign);
  if (magnitude == kInfBits) return static_cast<uint8_t>(f.max_code | sign);
  // Quanta of 2^(e - man_bits) where e is the value's binade, or the
  // smallest normal one for subnormals: counting them from the format's
  // zero gives the code directly, a carry into the next binade included.
  const int min_exp = 1 - f.bias;
  const int exp = std::max(static_cast<int>(magnitude >> 23) - 127, min_exp);
  const uint64_t code =
      (static_cast<uint64_t>(exp - min_exp) << f.man_bits) + round_to_quantum(magnitude, exp - f.man_bits);
  return static_cast<uint8_t>((code > f.max_code ? f.max_code : code) | sign);
}

float decode_minifloat(const MiniFloat& f, uint8_t code) {
  const int sign_shift = f.exp_bits + f.man_bits;
  const bool negative = (code >> sign_shift) & 1;
  const int magnitude = code & ((1 << sign_shift) - 1);
  const int exp = magnitude >> f.man_bits, man = magnitude & ((1 << f.man_bits) - 1);
  float value;
  if (f.nan_code != 0 && !f.ieee_top_exponent && magnitude == f.nan_code) {
    value = std::numeric_limits<float>::quiet_NaN();
  } else if (f.ieee_top_exponent && exp == (1 << f.exp_bits) - 1) {
    value = man == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    value = std::ldexp(static_cast<float>(man), 1 - f.bias - f.man_bits);
  } else {
    value = std::ldexp(static_cast<float>((1 << f.man_bits) + man), exp - f.bias - f.man_bits);
  }
  return negative ? -value : value;
}

uint8_t encode_int(int max, int bits, float value) {
  const uint32_t raw = float_bits(value), magnitude = raw & 0x7FFFFFFF;
  if (magnitude > kInfBits) return 0;
  const uint32_t rounded = magnitude == kInfBits ? kHuge : round_to_quantum(magnitude, 0);
  const int n = static_cast<int>(std::min<uint32_t>(rounded, static_cast<uint32_t>(max)));
  const int signed_n = (raw >> 31) ? -n : n;
  return static_cast<uint8_t>(static_cast<unsigned>(signed_n) & ((1u << bits) - 1));
}

float decode_int(int bits, uint8_t code) {
  const int value = code & ((1 << bits) - 1);
  return static_cast<float>(value >= (1 << (bits - 1)) ? value - (1 << bits) : value);
}

// int2 (quantize.h): bit 1 the sign, bit 0 whether the magnitude is 1.5
// rather than 0.5. Comparing |x|'s bits with 1.0f's orders as the values
// do; the tie at exactly 1 stays at 0.5, infinities saturate at 1.5.
uint8_t encode_int2(float value) {
  const uint32_t raw = float_bits(value), magnitude = raw & 0x7FFFFFFF;
  if (magnitude > kInfBits) return 0;
  const uint32_t large = magnitude > float_bits(1.0f) ? 1 : 0;
  return static_cast<uint8_t>(((raw >> 31) << 1) | large);
}

float decode_int2(uint8_t code) {
  const float magnitude = (code & 1) ? 1.5f : 0.5f;
  return (code & 2) ? -magnitude : magnitude;
}

// decode_value for every code of a format: dequantising is a look-up.
constexpr int kQuantFormats = static_cast<int>(QuantFormat::Int2) + 1;
using DecodeTable = std::array<float, 256>;

const DecodeTable& decode_table(QuantFormat format) {
  static const auto tables = [] {
    std::array<DecodeTable, kQuantFormats> all{};
    for (int f = 0; f < kQuantFormats; ++f) {
      for (int code = 0; code < 256; ++code) {
        all[f][code] = decode_value(static_cast<QuantFormat>(f), static_cast<uint8_t>(code));
      }
    }
    return all;
  }();
  return tables[static_cast<int>(format)];
}

// Values per parallel task: large enough that the tasks cost more than
// their dispatch; the results do not depend on it.
constexpr int64_t kGrain = 1 << 15;

// One block: its scale, and each value's code into codes[i] (one byte per
// value; the 4- and 2-bit formats are packed afterwards). `encode` is the format's
// encoder, inlined: a call through encode_value per value costs a third of
// the time.
template <typename Encode>
void quantize_block(float format_max, const float* x, int64_t n, float* scale, uint8_t* codes, Encode encode) {
  float absmax = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    finite = finite && a <= std::numeric_limits<float>::max();
    absmax = std::max(absmax, a);
  }
  if (!finite) {
    *scale = std::numeric_limits<float>::quiet_NaN();
    std::memset(codes, 0, static_cast<size_t>(n));
    return;
  }
  const float s = absmax / format_max;
  *scale = s;
  // A scale of 0 (all zeros, or a largest magnitude so small that the
  // division underflows) encodes every value as a zero of its sign.
  if (s == 0) {
    for (int64_t i = 0; i < n; ++i) codes[i] = encode(x[i] * 0.0f);
    return;
  }
  for (int64_t i = 0; i < n; ++i) codes[i] = encode(x[i] / s);
}

// Codes (one byte per value) and scales of n values in blocks.
template <typename Encode>
void quantize_all(float format_max, const float* in, int64_t n, int64_t block_size, float* scales, uint8_t* codes,
                  Encode encode) {
  const int64_t blocks = scale_count(n, block_size);
  at::parallel_for(0, blocks, std::max<int64_t>(1, kGrain / block_size), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * block_size;
      quantize_block(format_max, in + first, std::min(block_size, n - first), scales + b, codes + first, encode);
    }
  });
}

void quantize_codes(QuantFormat format, const float* in, int64_t n, int64_t block_size, float* scales, uint8_t* codes) {
  const float max = quant_max(format);
  switch (format) {
    case QuantFormat::Fp8E4M3:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_minifloat(kE4M3, v); });
    case QuantFormat::Fp8E5M2:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_minifloat(kE5M2, v); });
    case QuantFormat::Fp4E2M1:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_minifloat(kE2M1, v); });
    case QuantFormat::Int8:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_int(127, 8, v); });
    case QuantFormat::Int4:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_int(7, 4, v); });
    case QuantFormat::Int2:
      return quantize_all(max, in, n, block_size, scales, codes, [](float v) { return encode_int2(v); });
  }
}

void check_payload(const QuantizedPayload& p) {
  auto fail = [&](const std::string& what) {
    throw Error(std::string("quantized payload (") + to_string(p.format) + "): " + what);
  };
  if (p.block_size < 1) fail("block size " + std::to_string(p.block_size) + " is below 1");
  const int64_t n = p.numel();
  if (!p.codes.defined() || p.codes.scalar_type() != at::kByte || p.codes.numel() != packed_bytes(p.format, n)) {
    fail("expected " + std::to_string(packed_bytes(p.format, n)) + " uint8 codes for " + std::to_string(n) + " values");
  }
  if (!p.scales.defined() || p.scales.scalar_type() != at::kFloat || p.scales.numel() != scale_count(n, p.block_size)) {
    fail("expected " + std::to_string(scale_count(n, p.block_size)) + " float32 scales for " + std::to_string(n) +
         " values in blocks of " + std::to_string(p.block_size));
  }
}

}  // namespace

uint8_t encode_value(QuantFormat format, float value) {
  if (const MiniFloat* f = minifloat(format)) return encode_minifloat(*f, value);
  if (format == QuantFormat::Int2) return encode_int2(value);
  return format == QuantFormat::Int8 ? encode_int(127, 8, value) : encode_int(7, 4, value);
}

float decode_value(QuantFormat format, uint8_t code) {
  if (const MiniFloat* f = minifloat(format)) return decode_minifloat(*f, code);
  if (format == QuantFormat::Int2) return decode_int2(code);
  return decode_int(quant_bits(format), code);
}

int64_t QuantizedPayload::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t QuantizedPayload::payload_bytes() const {
  return (codes.defined() ? codes.numel() : 0) + (scales.defined() ? 4 * scales.numel() : 0);
}

QuantizedPayload quantize(const at::Tensor& tensor, QuantFormat format, int64_t block_size) {
  if (block_size < 1) throw Error("quantize: block size " + std::to_string(block_size) + " is below 1");
  if (!c10::isFloatingType(tensor.scalar_type())) {
    throw Error(std::string("quantize: expected a floating-point tensor, got ") + c10::toString(tensor.scalar_type()));
  }
  QuantizedPayload p;
  p.format = format;
  p.block_size = block_size;
  p.shape = tensor.sizes().vec();
  p.dtype = tensor.scalar_type();
  p.device = tensor.device();
  const at::Tensor x = tensor.detach().to(at::kCPU, at::kFloat).contiguous();
  const int64_t n = x.numel(), blocks = scale_count(n, block_size);
  p.scales = at::empty({blocks}, at::kFloat);
  const int bits = quant_bits(format);
  at::Tensor codes = at::empty({n}, at::kByte);
  uint8_t* out = codes.data_ptr<uint8_t>();
  quantize_codes(format, x.data_ptr<float>(), n, block_size, p.scales.data_ptr<float>(), out);
  if (bits == 8) {
    p.codes = codes;
    return p;
  }
  // 8 / bits codes per byte, the first in the lowest bits.
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  p.codes = at::empty({packed_bytes(format, n)}, at::kByte);
  uint8_t* packed = p.codes.data_ptr<uint8_t>();
  at::parallel_for(0, p.codes.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      unsigned byte = 0;
      for (int j = 0; j < per_byte && i * per_byte + j < n; ++j) byte |= (out[i * per_byte + j] & mask) << (j * bits);
      packed[i] = static_cast<uint8_t>(byte);
    }
  });
  return p;
}

at::Tensor dequantize_float(const QuantizedPayload& payload) {
  check_payload(payload);
  const at::Tensor codes = payload.codes.to(at::kCPU).contiguous();
  const at::Tensor scales = payload.scales.to(at::kCPU).contiguous();
  const int64_t n = payload.numel(), block = payload.block_size;
  at::Tensor result = at::empty(payload.shape, at::kFloat);
  const DecodeTable& table = decode_table(payload.format);
  // Code i is in byte i >> shift, at bit (i & (per_byte - 1)) * bits.
  const int bits = quant_bits(payload.format), shift = bits == 8 ? 0 : bits == 4 ? 1 : 2;
  const int64_t lane = (int64_t{1} << shift) - 1;
  const unsigned mask = (1u << bits) - 1;
  const uint8_t* in = codes.data_ptr<uint8_t>();
  const float* scale = scales.data_ptr<float>();
  float* out = result.data_ptr<float>();
  // Block by block: one scale per inner loop.
  at::parallel_for(0, scale_count(n, block), std::max<int64_t>(1, kGrain / block), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float s = scale[b];
      const int64_t last = std::min(n, (b + 1) * block);
      for (int64_t i = b * block; i < last; ++i) {
        out[i] = table[(in[i >> shift] >> ((i & lane) * bits)) & mask] * s;
      }
    }
  });
  return result;
}

at::Tensor dequantize(const QuantizedPayload& payload) {
  return dequantize_float(payload).to(payload.device, payload.dtype);
}

}  // namespace exogym::sdk
