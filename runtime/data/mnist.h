#pragma once
// The built-in "mnist" dataset: the original IDX files, plain or gzipped.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/sdk/dataset.h"

namespace exogym::runtime::data {

// Loads one split of MNIST from `folder`: "train" reads train-images-idx3-ubyte
// and train-labels-idx1-ubyte, "test" reads the t10k-* files; each file may
// also be gzipped (name + ".gz"; the plain file wins when both exist).
// Images are normalized once at load, as torchvision's
// ToTensor + Normalize(0.1307, 0.3081) would, so get() only gathers rows.
// Throws sdk::DataError for missing or malformed files and sdk::ConfigError
// (with an empty JSON path, for the caller to fill in) for an unknown split.
class MnistDataset : public sdk::Dataset {
 public:
  static constexpr double kMean = 0.1307;
  static constexpr double kStd = 0.3081;

  MnistDataset(const std::filesystem::path& folder, const std::string& split);

  int64_t size() const override { return labels_.size(0); }

  // {"input": [B, 1, rows, cols] float32, "target": [B] int64}.
  // Thread-safe: reads the stored tensors only.
  sdk::Batch get(const std::vector<int64_t>& indices) const override;

  // All examples: [N, 1, rows, cols] float32 (normalized) and [N] int64.
  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor images_;
  at::Tensor labels_;
};

}  // namespace exogym::runtime::data
