#pragma once
// The built-in "tensors" dataset: examples from tensor files a PyTorch or
// NumPy user writes (docs/from-pytorch.md), one field per tensor, the first
// dimension the examples: a folder of .npy files (numpy.save: input.npy,
// target.npy, ...) or a .safetensors file (safetensors.torch.save_file).
// Files are memory-mapped, never copied, and shared by every node thread;
// a batch gathers its examples' rows of every field.
//
// Splits are separate files (data.train.path and data.val.path, or a
// folder holding <split>/ or <split>.safetensors), or one set of files cut
// by `split_fraction`: the first fraction of the examples trains, the rest
// ("test" or "val") validates.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/data/example_labels.h"
#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::data {

class MappedFile;

struct TensorsOptions {
  std::optional<double> split_fraction;  // nullopt: the split is its own files
  std::string label_field = "target";    // the class labels of label partitions
};

class TensorsDataset : public sdk::Dataset, public KnownLabels {
 public:
  // Throws sdk::DataError naming the file (and the field) when a file is
  // missing or not what it claims, a dtype is not one LibTorch holds, the
  // fields disagree on the number of examples, there are none, or a
  // floating-point field holds NaN or infinity.
  TensorsDataset(const std::filesystem::path& path, const std::string& split, const TensorsOptions& options);

  static sdk::OptionSpecs option_specs();
  static TensorsOptions options_from_json(const nlohmann::json& options);

  int64_t size() const override { return count_; }
  // Every field's rows at `indices` (a copy, as stored: the file's dtype).
  sdk::Batch get(const std::vector<int64_t>& indices) const override;
  // label_field's values when it holds one integer per example, else
  // nullopt (then the label partitions say the data has no labels).
  std::optional<std::vector<int64_t>> all_labels() const override;

  // The files read, by field.
  const std::map<std::string, std::filesystem::path>& files() const { return files_; }

 private:
  std::map<std::string, at::Tensor> fields_;  // views of the mapped files, this split's rows
  std::map<std::string, std::filesystem::path> files_;
  std::vector<std::shared_ptr<const MappedFile>> mapped_;
  std::string label_field_;
  int64_t count_ = 0;
};

}  // namespace exogym::runtime::data
