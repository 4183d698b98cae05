#pragma once
// Every compressor of the library by the name a strategy's options give it
// (sparseloco's "compressor"), made from the settings those options hold
// (docs/compression.md#the-compression-library).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exogym/modules/compression/compressor.h"
#include "exogym/modules/compression/topk_compressor.h"
#include "exogym/sdk/quantize.h"

namespace exogym::modules {

struct CompressorChoice {
  std::string name = "topk";  // compressor_names()
  // top-k, random-k: values per chunk; sign, quantize: values per scale.
  int64_t chunk = 4096;
  double density = 1.0;                            // top-k, random-k: the fraction kept, in (0, 1]
  std::optional<sdk::QuantFormat> quant;           // top-k, random-k: the values' format; quantize: required
  OffsetCoding offsets = OffsetCoding::EliasFano;  // top-k
};

// "topk", "random_k", "sign", "quantize".
std::vector<std::string> compressor_names();

// The compressor `choice` names. sdk::ConfigError at `name_path` for an
// unknown name, at `quant_path` for "quantize" without a format.
std::shared_ptr<const Compressor> make_compressor(const CompressorChoice& choice, const std::string& name_path,
                                                  const std::string& quant_path);

}  // namespace exogym::modules
