#include "exogym/runtime/data/tokens.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace fs = std::filesystem;

sdk::OptionSpecs TokensDataset::option_specs() {
  const TokensOptions defaults;
  return {
      {"block_size", sdk::OptionType::PositiveInteger, defaults.block_size,
       "tokens per example (the model's context); input = tokens[i, i+T), target = tokens[i+1, i+T+1)"},
      {"vocab_size", sdk::OptionType::NonNegativeInteger, *defaults.vocab_size,
       "token ids must be below this (50257: GPT-2's tokenizer); checked as windows are read; 0: no check"},
      {"stride", sdk::OptionType::PositiveInteger, nullptr,
       "tokens between the starts of consecutive examples; null: block_size (non-overlapping windows, which "
       "keeps the epoch permutation of a large file small)"},
  };
}

TokensOptions TokensDataset::options_from_json(const nlohmann::json& options) {
  TokensOptions result;
  const auto has = [&](const char* key) {
    return options.is_object() && options.contains(key) && !options[key].is_null();
  };
  if (has("block_size")) result.block_size = options["block_size"].get<int64_t>();
  if (has("vocab_size")) {
    const auto vocab_size = options["vocab_size"].get<int64_t>();
    result.vocab_size = vocab_size > 0 ? std::optional<int64_t>(vocab_size) : std::nullopt;
  }
  if (has("stride")) result.stride = options["stride"].get<int64_t>();
  return result;
}

fs::path TokensDataset::resolve_file(const fs::path& path, const std::string& split) {
  std::error_code ec;
  if (path.empty()) throw sdk::DataError("tokens needs \"path\": a .bin file or a folder with <split>.bin files");
  if (!fs::exists(path, ec)) throw sdk::DataError(path.string() + ": no such file or folder");
  if (!fs::is_directory(path, ec)) return path;
  fs::path file = path / (split + ".bin");
  if (!fs::exists(file, ec) && split == "test" && fs::exists(path / "val.bin", ec)) file = path / "val.bin";
  if (fs::exists(file, ec)) return file;
  std::set<std::string> bins;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.path().extension() == ".bin") bins.insert(entry.path().filename().string());
  }
  std::string present;
  for (const auto& name : bins) present += (present.empty() ? "" : ", ") + name;
  throw sdk::DataError(path.string() + ": no " + split + ".bin for split \"" + split + "\" (the folder has " +
                       (present.empty() ? std::string("no .bin files") : present) +
                       "); nanoGPT's prepare scripts write train.bin and val.bin");
}

TokensDataset::TokensDataset(const fs::path& path, const std::string& split, const TokensOptions& options)
    : block_size_(options.block_size),
      vocab_size_(options.vocab_size),
      stride_(options.stride.value_or(options.block_size)) {
  EXOGYM_CHECK_INTERNAL(!(block_size_ < 1 || stride_ < 1 || (vocab_size_ && *vocab_size_ < 1)),
                        "TokensDataset: block_size, stride and vocab_size must be >= 1");
  file_ = std::make_shared<const MappedFile>(resolve_file(path, split));
  const std::string name = file_->file().string();
  if (file_->size() % 2 != 0) {
    throw sdk::DataError(name + ": " + std::to_string(file_->size()) +
                         " bytes, an odd number: not a file of uint16 tokens (corrupt or truncated?)");
  }
  num_tokens_ = static_cast<int64_t>(file_->size() / 2);
  if (num_tokens_ < block_size_ + 1) {
    throw sdk::DataError(name + ": " + std::to_string(num_tokens_) + " tokens, fewer than block_size + 1 = " +
                         std::to_string(block_size_ + 1) + " (one example needs its input and one more target)");
  }
  size_ = (num_tokens_ - block_size_ - 1) / stride_ + 1;
}

int64_t TokensDataset::token(int64_t i) const {
  const unsigned char* p = file_->data() + 2 * i;
  return static_cast<int64_t>(p[0]) | (static_cast<int64_t>(p[1]) << 8);  // little-endian, as numpy on x86 writes
}

sdk::Batch TokensDataset::get(const std::vector<int64_t>& indices) const {
  const auto B = static_cast<int64_t>(indices.size());
  at::Tensor input = at::empty({B, block_size_}, at::kLong);
  at::Tensor target = at::empty({B, block_size_}, at::kLong);
  int64_t* x = input.data_ptr<int64_t>();
  int64_t* y = target.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t index = indices[static_cast<size_t>(b)];
    EXOGYM_CHECK_INTERNAL(!(index < 0 || index >= size_), "TokensDataset::get: index " + std::to_string(index) +
                                                              " is outside [0, " + std::to_string(size_) + ")");
    const int64_t start = index * stride_;
    for (int64_t t = 0; t <= block_size_; ++t) {
      const int64_t id = token(start + t);
      if (vocab_size_ && id >= *vocab_size_) {
        throw sdk::DataError(file_->file().string() + ": token id " + std::to_string(id) + " at token offset " +
                             std::to_string(start + t) + " is not below vocab_size " + std::to_string(*vocab_size_) +
                             " (set the dataset option \"vocab_size\" to the tokenizer's vocabulary size)");
      }
      if (t < block_size_) x[b * block_size_ + t] = id;
      if (t > 0) y[b * block_size_ + t - 1] = id;
    }
  }
  return {{"input", input}, {"target", target}};
}

}  // namespace exogym::runtime::data
