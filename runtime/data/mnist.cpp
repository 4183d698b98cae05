#include "exogym/runtime/data/mnist.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <stdexcept>
#include <system_error>

#include "exogym/runtime/data/idx.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {
namespace {

constexpr const char* kExpectedFiles =
    "train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), t10k-images-idx3-ubyte(.gz) and "
    "t10k-labels-idx1-ubyte(.gz)";

// `<folder>/<name>` if it exists, else `<folder>/<name>.gz` if that exists.
std::filesystem::path find_idx_file(const std::filesystem::path& folder, const std::string& name) {
  std::error_code error;
  const auto plain = folder / name;
  if (std::filesystem::exists(plain, error)) return plain;
  auto gz = folder / (name + ".gz");
  if (std::filesystem::exists(gz, error)) return gz;
  throw sdk::DataError((folder / (name + "(.gz)")).string() +
                       ": no such file; download MNIST (e.g. from https://ossci-datasets.s3.amazonaws.com/mnist/, "
                       "the mirror torchvision uses) or point data.*.path at a folder with " +
                       kExpectedFiles);
}

std::string shape_text(const at::Tensor& tensor) {
  std::string text = "[";
  for (int64_t d = 0; d < tensor.dim(); ++d) text += (d ? ", " : "") + std::to_string(tensor.size(d));
  return text + "]";
}

}  // namespace

MnistDataset::MnistDataset(const std::filesystem::path& folder, const std::string& split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    // No "val" alias: MNIST has no validation split, and quietly evaluating on
    // the test set under another name would hide that choice from the user.
    throw sdk::ConfigError("", "mnist has the splits \"train\" and \"test\", got \"" + split + "\"");
  }
  if (folder.empty()) {
    throw sdk::DataError("mnist needs a path: point data.*.path at a folder with " + std::string(kExpectedFiles));
  }

  const auto images_file = find_idx_file(folder, prefix + "-images-idx3-ubyte");
  const auto labels_file = find_idx_file(folder, prefix + "-labels-idx1-ubyte");
  const at::Tensor images = read_idx(images_file);
  const at::Tensor labels = read_idx(labels_file);
  if (images.dim() != 3) {
    throw sdk::DataError(images_file.string() + ": expected images shaped [count, rows, columns], the header says " +
                         shape_text(images));
  }
  if (labels.dim() != 1) {
    throw sdk::DataError(labels_file.string() + ": expected labels shaped [count], the header says " +
                         shape_text(labels));
  }
  if (images.size(0) != labels.size(0)) {
    throw sdk::DataError(images_file.string() + " holds " + std::to_string(images.size(0)) + " images but " +
                         labels_file.string() + " holds " + std::to_string(labels.size(0)) + " labels");
  }

  // The same float32 arithmetic as ToTensor (x / 255) then Normalize, done
  // once on the 256 possible byte values; get() looks pixels up, so batches
  // are bit-identical to normalizing the whole set with tensor operations.
  const at::Tensor table = at::arange(256, at::kFloat).div_(255).sub_(kMean).div_(kStd).contiguous();
  std::copy_n(table.data_ptr<float>(), normalized_.size(), normalized_.begin());
  pixels_ = images.unsqueeze(1);
  labels_ = labels.to(at::kLong);
}

std::optional<std::vector<int64_t>> MnistDataset::all_labels() const {
  const int64_t* data = labels_.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + labels_.numel());
}

sdk::Batch MnistDataset::get(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (const int64_t index : indices) {
    EXOGYM_CHECK_INTERNAL(!(index < 0 || index >= n), "MnistDataset::get: index " + std::to_string(index) +
                                                          " is outside [0, " + std::to_string(n) + ")");
  }
  // Gathering and normalizing in one pass reads 1 byte per pixel instead of
  // the 4 a stored float would take.
  const int64_t row = pixels_.size(2) * pixels_.size(3);
  at::Tensor input = at::empty({static_cast<int64_t>(indices.size()), 1, pixels_.size(2), pixels_.size(3)}, at::kFloat);
  const uint8_t* in = pixels_.data_ptr<uint8_t>();
  float* out = input.data_ptr<float>();
  for (const int64_t index : indices) {
    const uint8_t* source = in + index * row;
    for (int64_t p = 0; p < row; ++p) out[p] = normalized_[source[p]];
    out += row;
  }
  // index_select only reads the index tensor, so wrapping the caller's vector
  // without a copy is safe.
  const at::Tensor index =
      at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())}, at::kLong);
  return {{"input", input}, {"target", labels_.index_select(0, index)}};
}

}  // namespace exogym::runtime::data
