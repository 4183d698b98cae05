// The formats' facts (sdk/quantize.h): names, bits, ranges and exact byte
// counts, apart from the codes themselves (quantize.cpp).
#include <string>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/quantize.h"

namespace exogym::sdk {

const char* to_string(QuantFormat format) {
  switch (format) {
    case QuantFormat::Fp8E4M3:
      return "fp8_e4m3";
    case QuantFormat::Fp8E5M2:
      return "fp8_e5m2";
    case QuantFormat::Fp4E2M1:
      return "fp4_e2m1";
    case QuantFormat::Int8:
      return "int8";
    case QuantFormat::Int4:
      return "int4";
    case QuantFormat::Int2:
      return "int2";
  }
  return "?";
}

std::vector<std::string> quant_format_names() {
  return {"fp8", "fp8_e4m3", "fp8_e5m2", "fp4", "fp4_e2m1", "int8", "int4", "int2"};
}

QuantFormat quant_format_from_name(const std::string& name, const std::string& json_path) {
  if (name == "fp8" || name == "fp8_e4m3") return QuantFormat::Fp8E4M3;
  if (name == "fp8_e5m2") return QuantFormat::Fp8E5M2;
  if (name == "fp4" || name == "fp4_e2m1") return QuantFormat::Fp4E2M1;
  if (name == "int8") return QuantFormat::Int8;
  if (name == "int4") return QuantFormat::Int4;
  if (name == "int2") return QuantFormat::Int2;
  const auto known = quant_format_names();
  const std::string guess = closest_name(name, known);
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  throw ConfigError(json_path, "unknown quantisation format \"" + name + "\"" +
                                   (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                                   " known formats: " + list);
}

int quant_bits(QuantFormat format) {
  if (format == QuantFormat::Int2) return 2;
  return format == QuantFormat::Fp4E2M1 || format == QuantFormat::Int4 ? 4 : 8;
}

float quant_max(QuantFormat format) {
  switch (format) {
    case QuantFormat::Fp8E4M3:
      return 448.0f;
    case QuantFormat::Fp8E5M2:
      return 57344.0f;
    case QuantFormat::Fp4E2M1:
      return 6.0f;
    case QuantFormat::Int8:
      return 127.0f;
    case QuantFormat::Int4:
      return 7.0f;
    case QuantFormat::Int2:
      return 1.5f;
  }
  return 0.0f;
}

int64_t packed_bytes(QuantFormat format, int64_t numel) { return (numel * quant_bits(format) + 7) / 8; }

int64_t scale_count(int64_t numel, int64_t block_size) { return (numel + block_size - 1) / block_size; }

int64_t quantized_bytes(QuantFormat format, int64_t numel, int64_t block_size) {
  return packed_bytes(format, numel) + 4 * scale_count(numel, block_size);
}

}  // namespace exogym::sdk
