// Rotated MNIST: a dataset built once per node (EXOGYM_NODE_DATASET_PLUGIN),
// the analogue of the Python reference's dataset_factory(rank, num_nodes,
// train). Node r sees every MNIST digit, rotated by r × `degrees` degrees:
// the nodes share their labels but not their inputs (feature skew, where the
// built-in label partitions give label skew). The validation set (rank -1)
// is built once and stays upright, so the averaged model is judged on the
// digits every node knows.
//
// The files are read with zlib (plain or .gz) and kept once per process,
// shared by every node's instance; rotation happens in get(), per batch.
#include <ATen/ATen.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/sdk/dataset.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/plugin.h"

namespace {

exogym::sdk::OptionSpecs rotated_mnist_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"degrees", OptionType::Number, 30.0, "node r's images are rotated by r × degrees"}};
}

// An IDX file's bytes after its header, and its dimensions.
struct Idx {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

uint32_t big_endian(const unsigned char* b) { return (uint32_t(b[0]) << 24) | (b[1] << 16) | (b[2] << 8) | b[3]; }

Idx read_idx(const std::string& base) {
  gzFile file = gzopen((base + ".gz").c_str(), "rb");  // gzread reads plain files too
  if (!file) file = gzopen(base.c_str(), "rb");
  if (!file) throw exogym::sdk::DataError(base + "(.gz): cannot open");
  Idx idx;
  unsigned char header[4];
  bool ok = gzread(file, header, 4) == 4 && header[2] == 0x08;  // unsigned bytes
  for (int d = 0; ok && d < header[3]; ++d) {
    unsigned char dim[4];
    ok = gzread(file, dim, 4) == 4;
    idx.dims.push_back(big_endian(dim));
  }
  int64_t count = 1;
  for (int64_t d : idx.dims) count *= d;
  idx.bytes.resize(ok ? static_cast<size_t>(count) : 0);
  ok = ok && gzread(file, idx.bytes.data(), static_cast<unsigned>(count)) == count;
  gzclose(file);
  if (!ok) throw exogym::sdk::DataError(base + ": not an IDX file of unsigned bytes");
  return idx;
}

// One split of MNIST as tensors: images [N, 1, 28, 28] normalised, labels [N].
struct Mnist {
  at::Tensor images, labels;
};

std::shared_ptr<const Mnist> load(const std::string& folder, const std::string& split) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Mnist>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = folder + "|" + split;
  if (auto kept = loaded[key].lock()) return kept;
  const std::string prefix = folder + "/" + (split == "train" ? "train" : "t10k");
  Idx images = read_idx(prefix + "-images-idx3-ubyte"), labels = read_idx(prefix + "-labels-idx1-ubyte");
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0])
    throw exogym::sdk::DataError(prefix + "-*: images and labels do not match");
  auto mnist = std::make_shared<Mnist>();
  mnist->images = at::from_blob(images.bytes.data(), {images.dims[0], 1, images.dims[1], images.dims[2]}, at::kByte)
                      .to(at::kFloat)
                      .div_(255)
                      .sub_(0.1307)
                      .div_(0.3081);
  mnist->labels = at::from_blob(labels.bytes.data(), {labels.dims[0]}, at::kByte).to(at::kLong);
  loaded[key] = mnist;
  return mnist;
}

class RotatedMnist final : public exogym::sdk::Dataset {
 public:
  RotatedMnist(const nlohmann::json& options, const exogym::sdk::DatasetRequest& request)
      : mnist_(load(request.path.string(), request.split)) {
    if (request.split != "train" && request.split != "test")
      throw exogym::sdk::ConfigError("", "expected split \"train\" or \"test\", got \"" + request.split + "\"");
    const double radians = (request.rank < 0 ? 0 : request.rank) * options.at("degrees").get<double>() * M_PI / 180;
    // The affine map grid_sample reads through: a rotation about the centre.
    theta_ =
        at::tensor({std::cos(radians), -std::sin(radians), 0.0, std::sin(radians), std::cos(radians), 0.0}, at::kFloat)
            .view({1, 2, 3});
  }

  int64_t size() const override { return mnist_->labels.size(0); }

  exogym::sdk::Batch get(const std::vector<int64_t>& indices) const override {
    const at::Tensor index = at::tensor(indices, at::kLong);
    at::Tensor images = mnist_->images.index_select(0, index);
    const at::Tensor grid = at::affine_grid_generator(theta_.expand({images.size(0), 2, 3}), images.sizes(), false);
    // Pixels rotated in from outside the image take the background's value.
    const double background = -0.1307 / 0.3081;
    images = at::grid_sampler(images - background, grid, 0, 0, false) + background;
    return {{"input", images}, {"target", mnist_->labels.index_select(0, index)}};
  }

 private:
  std::shared_ptr<const Mnist> mnist_;
  at::Tensor theta_;
};

}  // namespace

EXOGYM_NODE_DATASET_PLUGIN("rotated-mnist", "1.0.0", RotatedMnist, rotated_mnist_options)
