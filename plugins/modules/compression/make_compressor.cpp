#include "exogym/modules/compression/make_compressor.h"

#include <string>

#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/modules/compression/random_k.h"
#include "exogym/modules/compression/sign_compressor.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"

namespace exogym::modules {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::vector<std::string> compressor_names() { return {"topk", "random_k", "sign", "quantize"}; }

std::shared_ptr<const Compressor> make_compressor(const CompressorChoice& choice, const std::string& name_path,
                                                  const std::string& quant_path) {
  if (choice.name == "topk") {
    return std::make_shared<ChunkTopKCompressor>(
        SparseFormat{choice.chunk, choice.density, choice.quant, choice.offsets});
  }
  if (choice.name == "random_k") return std::make_shared<RandomKCompressor>(choice.chunk, choice.density, choice.quant);
  if (choice.name == "sign") return std::make_shared<SignCompressor>(choice.chunk);
  if (choice.name == "quantize") {
    if (!choice.quant) {
      throw sdk::ConfigError(quant_path, "the quantize compressor needs a low-bit format, not none: one of " +
                                             joined(sdk::quant_format_names()));
    }
    return std::make_shared<QuantizeCompressor>(*choice.quant, choice.chunk);
  }
  throw sdk::ConfigError(name_path,
                         "unknown compressor \"" + choice.name + "\": expected one of " + joined(compressor_names()));
}

}  // namespace exogym::modules
