#include "exogym/runtime/data/text_char.h"

#include <ATen/ops/from_blob.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace fs = std::filesystem;

namespace {

std::string read_text_file(const fs::path& file) {
  std::error_code ec;
  if (file.empty()) throw sdk::DataError("text-char needs \"path\": the text file to train on");
  if (!fs::exists(file, ec)) throw sdk::DataError(file.string() + ": no such file");
  if (fs::is_directory(file, ec))
    throw sdk::DataError(file.string() + ": is a folder; text-char reads one text file (e.g. input.txt)");
  // A FIFO would block, /dev/zero never end.
  if (!fs::is_regular_file(file, ec)) throw sdk::DataError(file.string() + ": not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw sdk::DataError(file.string() + ": cannot read: " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw sdk::DataError(file.string() + ": read failed: " + std::strerror(errno));
  return buffer.str();
}

}  // namespace

sdk::OptionSpecs TextCharDataset::option_specs() {
  const TextCharOptions defaults;
  return {
      {"block_size", sdk::OptionType::PositiveInteger, defaults.block_size,
       "tokens per example (the model's context); input = tokens[i, i+T), target = tokens[i+1, i+T+1)"},
      {"val_fraction", sdk::OptionType::Fraction, defaults.val_fraction,
       "the last fraction of the text is split \"val\" (and \"test\"); the rest is \"train\""},
      {"vocabulary",
       sdk::OptionType::String,
       defaults.vocabulary,
       "\"reference\": the reference's 65 Shakespeare characters plus EOS (66 tokens); \"file\": the file's "
       "distinct characters, sorted, plus EOS",
       {"reference", "file"}},
      {"stride", sdk::OptionType::PositiveInteger, defaults.stride,
       "tokens between the starts of consecutive examples (1: every position, as the reference)"},
  };
}

TextCharOptions TextCharDataset::options_from_json(const nlohmann::json& options) {
  TextCharOptions result;
  const auto has = [&](const char* key) {
    return options.is_object() && options.contains(key) && !options[key].is_null();
  };
  if (has("block_size")) result.block_size = options["block_size"].get<int64_t>();
  if (has("val_fraction")) result.val_fraction = options["val_fraction"].get<double>();
  if (has("vocabulary")) result.vocabulary = options["vocabulary"].get<std::string>();
  if (has("stride")) result.stride = options["stride"].get<int64_t>();
  return result;
}

CharVocabulary TextCharDataset::vocabulary_for(const fs::path& file, const std::string& vocabulary) {
  if (vocabulary == "reference") return CharVocabulary::reference();
  EXOGYM_CHECK_INTERNAL(vocabulary == "file", "text-char: unknown vocabulary \"" + vocabulary + "\"");
  return CharVocabulary::from_text(read_text_file(file), file.string());
}

TextCharDataset::TextCharDataset(const fs::path& file, const std::string& split, const TextCharOptions& options)
    : vocabulary_(CharVocabulary::reference()), block_size_(options.block_size) {
  if (split != "train" && split != "val" && split != "test") {
    throw sdk::ConfigError("",
                           "text-char has the splits \"train\", \"val\" and \"test\" (val and test are the same "
                           "last val_fraction of the text), got \"" +
                               split + "\"");
  }
  EXOGYM_CHECK_INTERNAL(
      !(options.block_size < 1 || options.stride < 1 || !(options.val_fraction > 0 && options.val_fraction <= 1)),
      "TextCharDataset: block_size and stride must be >= 1, val_fraction in (0, 1]");
  const std::string text = read_text_file(file);
  EXOGYM_CHECK_INTERNAL(options.vocabulary == "file" || options.vocabulary == "reference",
                        "TextCharDataset: unknown vocabulary \"" + options.vocabulary + "\"");
  if (options.vocabulary == "file") vocabulary_ = CharVocabulary::from_text(text, file.string());
  std::vector<int64_t> ids = vocabulary_.encode(
      text, file.string(),
      options.vocabulary == "reference" ? "set the dataset option \"vocabulary\": \"file\" to use the file's own "
                                          "characters"
                                        : "");
  ids.push_back(vocabulary_.eos());

  // The split point is in tokens; the reference split its records the same
  // way (train = records [0, 0.9 N), val = the rest).
  const auto total = static_cast<int64_t>(ids.size());
  const auto boundary = static_cast<int64_t>(std::floor(static_cast<double>(total) * (1.0 - options.val_fraction)));
  const int64_t begin = split == "train" ? 0 : boundary;
  const int64_t end = split == "train" ? boundary : total;
  const int64_t count = end - begin;
  if (count < block_size_ + 1) {
    throw sdk::DataError(file.string() + ": split \"" + split + "\" has " + std::to_string(count) + " tokens (of " +
                         std::to_string(total) + ", val_fraction " + std::to_string(options.val_fraction) +
                         "), fewer than block_size + 1 = " + std::to_string(block_size_ + 1) +
                         "; lower block_size or use a longer text");
  }
  tokens_ = at::from_blob(ids.data() + begin, {count}, at::kLong).clone();
  size_ = (count - block_size_ - 1) / options.stride + 1;
  // Example i is tokens_[i·stride, i·stride + T + 1): a view, no copy.
  windows_ = tokens_.unfold(0, block_size_ + 1, options.stride);
}

sdk::Batch TextCharDataset::get(const std::vector<int64_t>& indices) const {
  for (const int64_t index : indices) {
    EXOGYM_CHECK_INTERNAL(!(index < 0 || index >= size_), "TextCharDataset::get: index " + std::to_string(index) +
                                                              " is outside [0, " + std::to_string(size_) + ")");
  }
  const at::Tensor index =
      at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())}, at::kLong);
  const at::Tensor rows = windows_.index_select(0, index);  // [B, T + 1], a copy
  return {{"input", rows.narrow(1, 0, block_size_).contiguous()},
          {"target", rows.narrow(1, 1, block_size_).contiguous()}};
}

}  // namespace exogym::runtime::data
