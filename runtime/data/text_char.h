#pragma once
// The built-in "text-char" dataset: character-level language modelling on a
// text file (the reference's Shakespeare setup). The file becomes one stream
// of token ids (its characters, then EOS, as the reference does for each
// record); an example is a window of block_size tokens and its targets are
// the same window shifted by one.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/data/char_vocabulary.h"
#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::data {

struct TextCharOptions {
  int64_t block_size = 1024;
  double val_fraction = 0.1;
  std::string vocabulary = "reference";  // or "file"
  int64_t stride = 1;
};

class TextCharDataset : public sdk::Dataset {
 public:
  // Reads `file` and keeps split `split`: "train" is the first
  // 1 - val_fraction of the characters, "val" and "test" the rest (as the
  // reference's 0-0.9 / 0.9-1.0 ranges). Windows never cross the boundary.
  // Throws sdk::DataError naming the file (missing, not UTF-8, a character
  // outside the vocabulary, a split shorter than block_size + 1 tokens) and
  // sdk::ConfigError with an empty path for an unknown split.
  TextCharDataset(const std::filesystem::path& file, const std::string& split, const TextCharOptions& options);

  static sdk::OptionSpecs option_specs();
  static TextCharOptions options_from_json(const nlohmann::json& options);

  // The vocabulary of a run with vocabulary option `vocabulary` ("reference"
  // or "file") on `file`: what the dataset encodes with and what
  // exogym-generate decodes with.
  static CharVocabulary vocabulary_for(const std::filesystem::path& file, const std::string& vocabulary);

  // Windows start every `stride` tokens: (N - block_size - 1) / stride + 1 of them.
  int64_t size() const override { return size_; }
  // {"input": [B, block_size] int64, "target": [B, block_size] int64}, the
  // target being the input shifted by one token. Thread-safe.
  sdk::Batch get(const std::vector<int64_t>& indices) const override;
  int64_t tokens_per_example() const override { return block_size_; }

  const CharVocabulary& vocabulary() const { return vocabulary_; }
  // This split's token stream, int64 [N].
  const at::Tensor& tokens() const { return tokens_; }

 private:
  CharVocabulary vocabulary_;
  at::Tensor tokens_;
  at::Tensor windows_;  // [size, block_size + 1], a strided view of tokens_
  int64_t block_size_;
  int64_t size_;
};

}  // namespace exogym::runtime::data
