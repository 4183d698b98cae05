#pragma once
// The built-in "tokens" dataset: a file of uint16 token ids (little-endian),
// the train.bin / val.bin layout nanoGPT's prepare scripts write, for text
// tokenized elsewhere (e.g. GPT-2 BPE with tiktoken). The file is
// memory-mapped, never copied: the one dataset object is shared by every node
// thread, and only the windows drawn are read.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/data/mapped_file.h"
#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::data {

struct TokensOptions {
  int64_t block_size = 1024;
  std::optional<int64_t> vocab_size = 50257;  // nullopt (option 0): ids are not checked
  std::optional<int64_t> stride;              // nullopt: block_size
};

class TokensDataset : public sdk::Dataset {
 public:
  // `path` is a file, or a folder holding <split>.bin ("test" falls back to
  // val.bin, since nanoGPT writes only train.bin and val.bin). Throws
  // sdk::DataError naming the file when it is missing, has an odd number of
  // bytes (not uint16 tokens) or fewer than block_size + 1 tokens.
  TokensDataset(const std::filesystem::path& path, const std::string& split, const TokensOptions& options);

  static sdk::OptionSpecs option_specs();
  static TokensOptions options_from_json(const nlohmann::json& options);

  // The file a (path, split) pair reads; throws like the constructor.
  static std::filesystem::path resolve_file(const std::filesystem::path& path, const std::string& split);

  // Windows start every `stride` tokens: (N - block_size - 1) / stride + 1.
  int64_t size() const override { return size_; }
  // {"input": [B, block_size] int64, "target": the same shifted by one}.
  // Token ids are checked against vocab_size here, lazily, as windows are
  // read (a scan at load would read every page of a many-gigabyte file):
  // an id >= vocab_size throws sdk::DataError naming the file and offset.
  // Thread-safe.
  sdk::Batch get(const std::vector<int64_t>& indices) const override;
  int64_t tokens_per_example() const override { return block_size_; }

  int64_t num_tokens() const { return num_tokens_; }
  const std::filesystem::path& file() const { return file_->file(); }
  // Token `i` of the file.
  int64_t token(int64_t i) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  int64_t num_tokens_ = 0;
  int64_t block_size_;
  std::optional<int64_t> vocab_size_;
  int64_t stride_;
  int64_t size_ = 0;
};

}  // namespace exogym::runtime::data
