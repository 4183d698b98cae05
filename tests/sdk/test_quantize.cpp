// Low-bit payloads (sdk/quantize.h): each format's codes against closed
// forms, rounding and saturation, exact byte counts, packing order, round
// trips, error bounds, zeros and non-finite values, and the fp8 codes
// against LibTorch's own float8 casts where LibTorch has them.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/quantize.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::decode_value;
using exogym::sdk::encode_value;
using exogym::sdk::QuantFormat;
namespace sdk = exogym::sdk;
using exogym::test::kEveryQuantFormat;

namespace {

bool is_float_format(QuantFormat f) {
  return f != QuantFormat::Int8 && f != QuantFormat::Int4 && f != QuantFormat::Int2;
}

// Mantissa bits and smallest normal exponent of the fp formats.
int man_bits(QuantFormat f) { return f == QuantFormat::Fp8E4M3 ? 3 : f == QuantFormat::Fp8E5M2 ? 2 : 1; }
int min_exp(QuantFormat f) { return f == QuantFormat::Fp8E4M3 ? -6 : f == QuantFormat::Fp8E5M2 ? -14 : 0; }

std::vector<uint8_t> code_bytes(const at::Tensor& codes) {
  const at::Tensor c = codes.contiguous();
  return std::vector<uint8_t>(c.data_ptr<uint8_t>(), c.data_ptr<uint8_t>() + c.numel());
}

}  // namespace

TEST_CASE("quantize: codes decode to the formats' values", "[quantize]") {
  CHECK(decode_value(QuantFormat::Fp8E4M3, 0x7E) == 448.0f);
  CHECK(decode_value(QuantFormat::Fp8E4M3, 0x38) == 1.0f);
  CHECK(decode_value(QuantFormat::Fp8E4M3, 0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(decode_value(QuantFormat::Fp8E4M3, 0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(decode_value(QuantFormat::Fp8E4M3, 0xBC) == -1.5f);
  CHECK(std::isnan(decode_value(QuantFormat::Fp8E4M3, 0x7F)));
  CHECK(std::isnan(decode_value(QuantFormat::Fp8E4M3, 0xFF)));
  CHECK(std::signbit(decode_value(QuantFormat::Fp8E4M3, 0x80)));
  CHECK(decode_value(QuantFormat::Fp8E5M2, 0x7B) == 57344.0f);
  CHECK(decode_value(QuantFormat::Fp8E5M2, 0x3C) == 1.0f);
  CHECK(decode_value(QuantFormat::Fp8E5M2, 0x01) == std::ldexp(1.0f, -16));
  CHECK(decode_value(QuantFormat::Fp8E5M2, 0x7C) == std::numeric_limits<float>::infinity());
  CHECK(decode_value(QuantFormat::Fp8E5M2, 0xFC) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(decode_value(QuantFormat::Fp8E5M2, 0x7D)));
  const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    CHECK(decode_value(QuantFormat::Fp4E2M1, static_cast<uint8_t>(c)) == fp4[c]);
    CHECK(decode_value(QuantFormat::Fp4E2M1, static_cast<uint8_t>(c | 8)) == -fp4[c]);
    CHECK(encode_value(QuantFormat::Fp4E2M1, fp4[c]) == c);
    CHECK(encode_value(QuantFormat::Fp4E2M1, -fp4[c]) == (c | 8));
  }
  CHECK(decode_value(QuantFormat::Int8, 0x81) == -127.0f);
  CHECK(decode_value(QuantFormat::Int8, 0x7F) == 127.0f);
  CHECK(decode_value(QuantFormat::Int4, 0x7) == 7.0f);
  CHECK(decode_value(QuantFormat::Int4, 0xF) == -1.0f);
  CHECK(decode_value(QuantFormat::Int4, 0x9) == -7.0f);
  // Every finite code encodes back to itself.
  for (QuantFormat f : kEveryQuantFormat) {
    for (int code = 0; code < (1 << sdk::quant_bits(f)); ++code) {
      const float v = decode_value(f, static_cast<uint8_t>(code));
      if (!std::isfinite(v) || (f == QuantFormat::Int4 && v == -8.0f) || (f == QuantFormat::Int8 && v == -128.0f)) {
        continue;
      }
      INFO(sdk::to_string(f) << " code " << code);
      CHECK(encode_value(f, v) == code);
    }
  }
}

TEST_CASE("quantize: values round to the nearest code, ties to even, and saturate at the format's max", "[quantize]") {
  using F = QuantFormat;
  CHECK(encode_value(F::Fp8E4M3, 1.0625f) == 0x38);                // halfway 1 .. 1.125: to 1 (even mantissa)
  CHECK(encode_value(F::Fp8E4M3, 1.1875f) == 0x3A);                // halfway 1.125 .. 1.25: to 1.25
  CHECK(encode_value(F::Fp8E4M3, 1.0626f) == 0x39);                // past halfway: up
  CHECK(encode_value(F::Fp8E4M3, 1000.0f) == 0x7E);                // saturates at 448
  CHECK(encode_value(F::Fp8E4M3, -1e30f) == 0xFE);                 // and -448
  CHECK(encode_value(F::Fp8E4M3, INFINITY) == 0x7E);               // infinities too
  CHECK(encode_value(F::Fp8E4M3, std::ldexp(1.0f, -10)) == 0x00);  // half the smallest subnormal: to 0
  CHECK(encode_value(F::Fp8E4M3, std::ldexp(3.0f, -10)) == 0x02);  // 1.5 subnormal quanta: to 2
  CHECK(encode_value(F::Fp8E4M3, -0.0f) == 0x80);
  CHECK(encode_value(F::Fp8E4M3, NAN) == 0x7F);
  CHECK(encode_value(F::Fp8E5M2, 1e6f) == 0x7B);    // 57344, never infinity
  CHECK(encode_value(F::Fp8E5M2, 1.125f) == 0x3C);  // halfway 1 .. 1.25: to 1
  CHECK(encode_value(F::Fp4E2M1, 2.5f) == 4);       // halfway 2 .. 3: to 2
  CHECK(encode_value(F::Fp4E2M1, 3.5f) == 6);       // halfway 3 .. 4: to 4
  CHECK(encode_value(F::Fp4E2M1, 5.0f) == 6);       // halfway 4 .. 6: to 4
  CHECK(encode_value(F::Fp4E2M1, 0.25f) == 0);      // halfway 0 .. 0.5: to 0
  CHECK(encode_value(F::Fp4E2M1, 0.75f) == 2);      // halfway 0.5 .. 1: to 1
  CHECK(encode_value(F::Fp4E2M1, -7.0f) == 0xF);    // -6
  CHECK(encode_value(F::Int8, 2.5f) == 2);
  CHECK(encode_value(F::Int8, 3.5f) == 4);
  CHECK(encode_value(F::Int8, -2.5f) == 0xFE);  // -2
  CHECK(encode_value(F::Int8, 200.0f) == 127);
  CHECK(encode_value(F::Int8, -200.0f) == 0x81);  // -127, never -128
  CHECK(encode_value(F::Int4, -9.0f) == 0x9);     // -7
  CHECK(encode_value(F::Int4, 0.5f) == 0);
}

TEST_CASE("quantize: a payload holds exactly the packed codes and one fp32 scale per block", "[quantize]") {
  // The brief's example: 1000 floats in blocks of 32 as fp4: 500 bytes of
  // codes and 32 scales of 4 bytes.
  const auto fp4 = sdk::quantize(at::randn({1000}), QuantFormat::Fp4E2M1, 32);
  CHECK(fp4.codes.numel() == 500);
  CHECK(fp4.scales.numel() == 32);
  CHECK(fp4.payload_bytes() == 500 + 32 * 4);
  CHECK(sdk::quantized_bytes(QuantFormat::Fp4E2M1, 1000, 32) == 628);
  CHECK(sdk::quantized_bytes(QuantFormat::Int8, 1000, 32) == 1128);
  CHECK(sdk::quantized_bytes(QuantFormat::Int4, 7, 4) == 4 + 2 * 4);
  CHECK(sdk::quantized_bytes(QuantFormat::Fp8E5M2, 0, 4) == 0);
  // fp4 at the default block of 128: 68 bytes per 128 values, 7.5 times
  // fewer than fp32's 512.
  CHECK(sdk::quantized_bytes(QuantFormat::Fp4E2M1, 128) == 68);
  for (QuantFormat f : kEveryQuantFormat) {
    for (int64_t n : {0, 1, 7, 128, 1001}) {
      for (int64_t block : {1, 3, 32, 128}) {
        INFO(sdk::to_string(f) << " n " << n << " block " << block);
        const auto p = sdk::quantize(at::randn({n}), f, block);
        CHECK(p.payload_bytes() == sdk::quantized_bytes(f, n, block));
        CHECK(p.payload_bytes() == (n * sdk::quant_bits(f) + 7) / 8 + 4 * ((n + block - 1) / block));
        CHECK(p.codes.scalar_type() == at::kByte);
        CHECK(p.scales.scalar_type() == at::kFloat);
      }
    }
  }
}

TEST_CASE("quantize: 4-bit codes pack value 2i in the low nibble and 2i+1 in the high nibble", "[quantize]") {
  // Block max 6 = fp4's max: scale 1, the codes are the values' own.
  const auto fp4 = sdk::quantize(at::tensor({1.0f, -0.5f, 6.0f}), QuantFormat::Fp4E2M1, 3);
  CHECK(fp4.scales.item<float>() == 1.0f);
  CHECK(code_bytes(fp4.codes) == std::vector<uint8_t>{0x92, 0x07});  // (-0.5 << 4) | 1, then 6 and an empty nibble
  const auto int4 = sdk::quantize(at::tensor({-1.0f, 7.0f, 3.0f, -7.0f}), QuantFormat::Int4, 4);
  CHECK(int4.scales.item<float>() == 1.0f);
  CHECK(code_bytes(int4.codes) == std::vector<uint8_t>{0x7F, 0x93});
  CHECK(at::equal(sdk::dequantize(int4), at::tensor({-1.0f, 7.0f, 3.0f, -7.0f})));
}

TEST_CASE("quantize: int2 has the levels +-0.5 and +-1.5, packs four codes per byte, the first in the low bits",
          "[quantize]") {
  using F = QuantFormat;
  CHECK(sdk::quant_bits(F::Int2) == 2);
  CHECK(sdk::quant_max(F::Int2) == 1.5f);
  const float levels[4] = {0.5f, 1.5f, -0.5f, -1.5f};  // code: sign in bit 1, magnitude in bit 0
  for (int c = 0; c < 4; ++c) {
    CHECK(decode_value(F::Int2, static_cast<uint8_t>(c)) == levels[c]);
    CHECK(encode_value(F::Int2, levels[c]) == c);
  }
  CHECK(encode_value(F::Int2, 0.3f) == 0);
  CHECK(encode_value(F::Int2, 1.0f) == 0);  // the tie goes to 0.5
  CHECK(encode_value(F::Int2, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(encode_value(F::Int2, -0.2f) == 2);
  CHECK(encode_value(F::Int2, -1.2f) == 3);
  CHECK(encode_value(F::Int2, 1e9f) == 1);  // saturates at 1.5
  CHECK(encode_value(F::Int2, -INFINITY) == 3);
  CHECK(encode_value(F::Int2, 0.0f) == 0);  // no zero: the sign decides
  CHECK(encode_value(F::Int2, -0.0f) == 2);
  CHECK(encode_value(F::Int2, NAN) == 0);
  // Block max 1.5: scale 1. Codes 1, 2, 0, 3 | 1: 1 + 2*4 + 0*16 + 3*64, then 1.
  const at::Tensor x = at::tensor({1.5f, -0.5f, 0.5f, -1.5f, 1.5f});
  const auto p = sdk::quantize(x, F::Int2, 5);
  CHECK(p.scales.item<float>() == 1.0f);
  CHECK(code_bytes(p.codes) == std::vector<uint8_t>{0xC9, 0x01});
  CHECK(at::equal(sdk::dequantize(p), x));
  CHECK(p.payload_bytes() == 2 + 4);
  CHECK(sdk::quantized_bytes(F::Int2, 1000, 32) == 250 + 32 * 4);
  CHECK(sdk::quantized_bytes(F::Int2, 7, 4) == 2 + 2 * 4);
  // In a block of scale 2: 1.1 -> 1 (0.55 of the scale: 0.5), 2.1 -> 3 (1.05: 1.5).
  const auto q = sdk::quantize(at::tensor({1.1f, -2.1f, 3.0f}), F::Int2, 3);
  CHECK(q.scales.item<float>() == 2.0f);
  CHECK(at::equal(sdk::dequantize(q), at::tensor({1.0f, -3.0f, 3.0f})));
}

TEST_CASE("quantize: exactly representable values round-trip exactly, in any shape and dtype", "[quantize]") {
  for (QuantFormat f : kEveryQuantFormat) {
    INFO(sdk::to_string(f));
    // Every finite value of the format, both signs, scaled by 2^-3: the
    // block's scale is exactly 2^-3.
    std::vector<float> values;
    for (int code = 0; code < (1 << sdk::quant_bits(f)); ++code) {
      const float v = decode_value(f, static_cast<uint8_t>(code));
      if (std::isfinite(v) && std::fabs(v) <= sdk::quant_max(f)) values.push_back(std::ldexp(v, -3));
    }
    const at::Tensor x = at::tensor(values);
    const auto p = sdk::quantize(x, f, x.numel());
    CHECK(p.scales.item<float>() == 0.125f);
    CHECK(at::equal(sdk::dequantize(p), x));
  }
  // Shape, dtype and device come back as they were.
  // Integers in a block whose largest is 127: int8's scale is 1.
  at::Tensor bf16 = (at::arange(30, at::kFloat) - 15).to(at::kBFloat16);
  bf16[0] = -127;
  bf16 = bf16.reshape({2, 3, 5});
  const auto p = sdk::quantize(bf16, QuantFormat::Int8, 30);
  const at::Tensor back = sdk::dequantize(p);
  CHECK(back.scalar_type() == at::kBFloat16);
  CHECK(back.sizes() == bf16.sizes());
  CHECK(at::equal(back, bf16));
  const at::Tensor scalar = at::full({}, 3.0, at::kDouble);
  const at::Tensor scalar_back = sdk::dequantize(sdk::quantize(scalar, QuantFormat::Fp8E4M3));
  CHECK(scalar_back.dim() == 0);
  CHECK(scalar_back.scalar_type() == at::kDouble);
  CHECK(scalar_back.item<double>() == 3.0);
}

TEST_CASE("quantize: the error stays within half a code's spacing at the value's magnitude", "[quantize]") {
  at::Generator gen = at::detail::createCPUGenerator(41);
  const at::Tensor x = at::randn({20000}, gen) * at::exp(at::randn({20000}, gen) * 2);  // wide magnitudes
  const int64_t block = 64;
  for (QuantFormat f : kEveryQuantFormat) {
    INFO(sdk::to_string(f));
    const auto p = sdk::quantize(x, f, block);
    const at::Tensor y = sdk::dequantize(p);
    const float* xs = x.data_ptr<float>();
    const float* ys = y.data_ptr<float>();
    const float* scales = p.scales.data_ptr<float>();
    double worst_relative = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double scale = scales[i / block], err = std::fabs(static_cast<double>(ys[i]) - xs[i]);
      double bound;
      if (is_float_format(f)) {
        // Normal range: relative 2^-(M+1); below it, half a subnormal quantum.
        bound = std::max(std::fabs(xs[i]) * std::ldexp(1.0, -man_bits(f) - 1),
                         scale * std::ldexp(1.0, min_exp(f) - man_bits(f) - 1));
        if (std::fabs(xs[i]) >= scale * std::ldexp(1.0, min_exp(f))) {
          worst_relative = std::max(worst_relative, err / std::fabs(xs[i]));
        }
      } else {
        bound = scale / 2;
      }
      // fp32's own roundings (x / scale, code * scale) add a few 2^-24.
      REQUIRE(err <= bound * (1 + 1e-6) + std::fabs(xs[i]) * 4e-7);
    }
    // Normal values: the largest relative error is half a quantum at the
    // midpoint of a binade's first interval, 2^-(M+1) / (1 + 2^-(M+1)),
    // and the sample comes close to it.
    if (is_float_format(f)) {
      const double half = std::ldexp(1.0, -man_bits(f) - 1), sup = half / (1 + half);
      CHECK(worst_relative <= sup * (1 + 1e-5));
      CHECK(worst_relative > 0.95 * sup);
    }
  }
}

TEST_CASE("quantize: zero blocks decode to zeros, a non-finite value makes its whole block NaN", "[quantize]") {
  for (QuantFormat f : kEveryQuantFormat) {
    INFO(sdk::to_string(f));
    const at::Tensor zeros = at::tensor({0.0f, -0.0f, 0.0f, 1.0f, 2.0f, -4.0f});
    const auto p = sdk::quantize(zeros, f, 3);
    CHECK(p.scales[0].item<float>() == 0.0f);
    const at::Tensor back = sdk::dequantize(p);
    CHECK(at::equal(back.slice(0, 0, 3), zeros.slice(0, 0, 3)));
    // The fp formats keep -0, and int2, which has a sign but no zero.
    CHECK(std::signbit(back[1].item<float>()) == (is_float_format(f) || f == QuantFormat::Int2));
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      const at::Tensor x = at::tensor({1.0f, bad, 2.0f, 3.0f, -4.0f, 5.0f});
      const auto q = sdk::quantize(x, f, 3);
      CHECK(std::isnan(q.scales[0].item<float>()));
      const at::Tensor y = sdk::dequantize(q);
      CHECK(at::isnan(y.slice(0, 0, 3)).all().item<bool>());
      CHECK(at::isfinite(y.slice(0, 3, 6)).all().item<bool>());
    }
  }
}

TEST_CASE("quantize: the bytes do not depend on the number of threads", "[quantize]") {
  at::Generator gen = at::detail::createCPUGenerator(7);
  const at::Tensor x = at::randn({300001}, gen);
  const int threads = at::get_num_threads();
  for (QuantFormat f : kEveryQuantFormat) {
    INFO(sdk::to_string(f));
    at::set_num_threads(1);
    const auto one = sdk::quantize(x, f, 32);
    const at::Tensor one_back = sdk::dequantize(one);
    at::set_num_threads(4);
    const auto four = sdk::quantize(x, f, 32);
    CHECK(at::equal(one.codes, four.codes));
    CHECK(at::equal(one.scales, four.scales));
    CHECK(at::equal(one_back, sdk::dequantize(four)));
  }
  at::set_num_threads(threads);
}

TEST_CASE("quantize: bad inputs and format names are errors naming what is wrong", "[quantize]") {
  CHECK(sdk::quant_format_from_name("fp8", "q") == QuantFormat::Fp8E4M3);
  CHECK(sdk::quant_format_from_name("fp4", "q") == QuantFormat::Fp4E2M1);
  CHECK(sdk::quant_format_from_name("fp8_e5m2", "q") == QuantFormat::Fp8E5M2);
  for (QuantFormat f : kEveryQuantFormat) CHECK(sdk::quant_format_from_name(sdk::to_string(f), "q") == f);
  const auto error =
      exogym::test::config_error([] { sdk::quant_format_from_name("intt4", "strategy.options.quantize"); });
  CHECK(error.path() == "strategy.options.quantize");
  CHECK_THAT(error.what(), Catch::Contains("unknown quantisation format \"intt4\"") &&
                               Catch::Contains("did you mean \"int4\"") && Catch::Contains("fp8_e5m2"));
  CHECK_THROWS_WITH(sdk::quantize(at::ones({4}, at::kLong), QuantFormat::Int8),
                    Catch::Contains("expected a floating-point tensor"));
  CHECK_THROWS_WITH(sdk::quantize(at::ones({4}), QuantFormat::Int8, 0), Catch::Contains("block size 0"));
  auto p = sdk::quantize(at::ones({10}), QuantFormat::Int4, 4);
  p.codes = p.codes.slice(0, 0, 4);
  CHECK_THROWS_WITH(sdk::dequantize(p), Catch::Contains("expected 5 uint8 codes for 10 values"));
  p = sdk::quantize(at::ones({10}), QuantFormat::Int4, 4);
  p.scales = p.scales.to(at::kDouble);
  CHECK_THROWS_WITH(sdk::dequantize(p), Catch::Contains("expected 3 float32 scales"));
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Every float LibTorch's cast should agree on for `format`: each pair of
// neighbouring codes' midpoint and the floats beside it, then a sweep of
// every 1009th fp32 bit pattern from 0 to `limit`, both signs.
std::vector<float> float8_probe_values(QuantFormat format, float limit) {
  std::vector<float> probes;
  for (int code = 0; code < 0x7F; ++code) {
    const float lo = decode_value(format, static_cast<uint8_t>(code));
    const float hi = decode_value(format, static_cast<uint8_t>(code + 1));
    if (!std::isfinite(hi)) break;
    const float mid = lo + (hi - lo) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), hi}) probes.push_back(v);
  }
  for (uint32_t b = 0; b <= bits_of(limit); b += 1009) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    probes.push_back(v);
  }
  probes.push_back(limit);
  const size_t positive = probes.size();
  for (size_t i = 0; i < positive; ++i) probes.push_back(-probes[i]);
  return probes;
}

void check_against_libtorch(QuantFormat format, at::ScalarType dtype, float limit) {
  INFO(sdk::to_string(format));
  // Decoding: all 256 codes.
  const at::Tensor codes = at::arange(256, at::kInt).to(at::kByte);
  const at::Tensor theirs = codes.view(dtype).to(at::kFloat);
  for (int code = 0; code < 256; ++code) {
    const float mine = decode_value(format, static_cast<uint8_t>(code)), their = theirs[code].item<float>();
    INFO("code " << code << ": ours " << mine << ", LibTorch's " << their);
    if (std::isnan(their)) {
      CHECK(std::isnan(mine));
    } else {
      CHECK(bits_of(mine) == bits_of(their));
    }
  }
  // Encoding: every probe, LibTorch's cast against ours.
  const std::vector<float> probes = float8_probe_values(format, limit);
  const at::Tensor cast = at::tensor(probes).to(dtype).view(at::kByte);
  const uint8_t* their_codes = cast.data_ptr<uint8_t>();
  size_t mismatches = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (encode_value(format, probes[i]) == their_codes[i]) continue;
    if (++mismatches <= 5) {
      FAIL_CHECK("value " << probes[i] << ": ours " << int(encode_value(format, probes[i])) << ", LibTorch's "
                          << int(their_codes[i]));
    }
  }
  CHECK(mismatches == 0);
  CHECK(probes.size() > 2000000);
}

}  // namespace

TEST_CASE("quantize: fp8 codes are LibTorch's float8 casts bit for bit wherever those do not overflow", "[quantize]") {
  // LibTorch rounds to the largest finite value up to the midpoint between
  // it and the next power of two (464 for e4m3, just below 61440 for e5m2)
  // and gives NaN or infinity beyond, where ours saturates.
  check_against_libtorch(QuantFormat::Fp8E4M3, at::kFloat8_e4m3fn, 464.0f);
  check_against_libtorch(QuantFormat::Fp8E5M2, at::kFloat8_e5m2, std::nextafter(61440.0f, 0.0f));
  // Beyond, ours saturates where LibTorch overflows.
  CHECK(encode_value(QuantFormat::Fp8E4M3, 465.0f) == 0x7E);
  CHECK(encode_value(QuantFormat::Fp8E5M2, 61440.0f) == 0x7B);
}
#endif
