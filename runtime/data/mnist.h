#pragma once
// The built-in "mnist" dataset: the original IDX files, plain or gzipped.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/runtime/data/example_labels.h"
#include "exogym/sdk/dataset.h"

namespace exogym::runtime::data {

// Loads one split of MNIST from `folder`: "train" reads train-images-idx3-ubyte
// and train-labels-idx1-ubyte, "test" reads the t10k-* files; each file may
// also be gzipped (name + ".gz"; the plain file wins when both exist).
// Images stay bytes in memory (47 MB for the training split, not 188 MB of
// floats); get() normalizes the rows it gathers through a table of the 256
// values torchvision's ToTensor + Normalize(0.1307, 0.3081) gives.
// Throws sdk::DataError for missing or malformed files and sdk::ConfigError
// (with an empty JSON path, for the caller to fill in) for an unknown split.
class MnistDataset : public sdk::Dataset, public KnownLabels {
 public:
  static constexpr double kMean = 0.1307;
  static constexpr double kStd = 0.3081;

  MnistDataset(const std::filesystem::path& folder, const std::string& split);

  int64_t size() const override { return labels_.size(0); }

  // {"input": [B, 1, rows, cols] float32, "target": [B] int64}.
  // Thread-safe: reads the stored tensors only.
  sdk::Batch get(const std::vector<int64_t>& indices) const override;

  std::optional<std::vector<int64_t>> all_labels() const override;

  // All examples: [N, 1, rows, cols] uint8 pixels and [N] int64 labels.
  const at::Tensor& pixels() const { return pixels_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor pixels_;
  at::Tensor labels_;
  std::array<float, 256> normalized_{};  // pixel value -> normalized float
};

}  // namespace exogym::runtime::data
