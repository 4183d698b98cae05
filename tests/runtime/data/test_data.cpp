// The data layer: IDX reading, MNIST, the synthetic dataset and the built-in
// dataset registry (the IID sampler: test_samplers.cpp).
#include <ATen/ops/bincount.h>
#include <ATen/ops/cdist.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "exogym/runtime/data/idx.h"
#include "exogym/runtime/data/mnist.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/data/synthetic.h"
#include "exogym/runtime/data/whole_gunzip.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using namespace exogym::runtime::data;
using Catch::Contains;
using exogym::sdk::ConfigError;
using exogym::sdk::DataError;
using exogym::test::to_vector;

namespace {

// A fresh folder under the system temp dir, removed at scope exit.
struct DataFolder {
  fs::path path;
  DataFolder() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("exogym-test-data-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~DataFolder() {
    std::error_code error;
    fs::remove_all(path, error);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

void put_be32(std::vector<unsigned char>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(value >> shift));
}

// An IDX file of unsigned bytes with the given dims; the data is 0, 1, 2, ...
// (mod 256) unless `data` is given.
std::vector<unsigned char> idx_bytes(const std::vector<uint32_t>& dims, std::vector<unsigned char> data = {},
                                     int type = 0x08) {
  std::vector<unsigned char> out = {0, 0, static_cast<unsigned char>(type), static_cast<unsigned char>(dims.size())};
  size_t count = 1;
  for (uint32_t dim : dims) {
    put_be32(out, dim);
    count *= dim;
  }
  if (data.empty()) {
    for (size_t i = 0; i < count; ++i) data.push_back(static_cast<unsigned char>(i % 256));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_plain(const fs::path& file, const std::vector<unsigned char>& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const fs::path& file, const std::vector<unsigned char>& bytes) {
  gzFile out = gzopen(file.c_str(), "wb");
  REQUIRE(out != nullptr);
  REQUIRE(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(out) == Z_OK);
}

std::vector<unsigned char> read_plain(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<int64_t> label_counts(const at::Tensor& labels) {
  const at::Tensor counts = at::bincount(labels, {}, 10).contiguous();
  return {counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel()};
}

}  // namespace

// ---------------------------------------------------------------------------
// IDX

TEST_CASE("read_idx reads plain and gzipped IDX files", "[data]") {
  DataFolder dir;
  const auto bytes = idx_bytes({2, 3, 4});
  write_plain(dir / "images-idx3-ubyte", bytes);
  write_gz(dir / "images-idx3-ubyte.gz", bytes);
  for (const char* name : {"images-idx3-ubyte", "images-idx3-ubyte.gz"}) {
    INFO(name);
    const at::Tensor t = read_idx(dir / name);
    REQUIRE(t.scalar_type() == at::kByte);
    REQUIRE(t.sizes().vec() == std::vector<int64_t>{2, 3, 4});
    const auto values = to_vector(t.flatten());
    std::vector<int64_t> expected(24);
    for (int i = 0; i < 24; ++i) expected[i] = i;
    REQUIRE(values == expected);
    // Row-major: element [1][2][3] is the last byte.
    REQUIRE(t[1][2][3].item<uint8_t>() == 23);
    REQUIRE(t[1][0][0].item<uint8_t>() == 12);
  }

  // A 1-D labels file, with values above 127 (unsigned).
  write_gz(dir / "labels.gz", idx_bytes({3}, {7, 200, 255}));
  const at::Tensor labels = read_idx(dir / "labels.gz");
  REQUIRE(labels.sizes().vec() == std::vector<int64_t>{3});
  REQUIRE(to_vector(labels) == std::vector<int64_t>{7, 200, 255});

  // Zero examples is a valid, empty file.
  write_plain(dir / "empty", idx_bytes({0, 28, 28}));
  REQUIRE(read_idx(dir / "empty").sizes().vec() == std::vector<int64_t>{0, 28, 28});
}

TEST_CASE("A whole .gz is inflated in one call when the build has libdeflate", "[data]") {
  DataFolder dir;
  const auto bytes = idx_bytes({3, 7, 5});
  write_gz(dir / "images.gz", bytes);
  write_plain(dir / "images", bytes);
  // The fast path is there exactly when CMake found libdeflate (tools/dev
  // installs it); without it, every file goes to zlib's reader.
  REQUIRE(whole_gunzip_available() == static_cast<bool>(EXOGYM_TEST_HAVE_LIBDEFLATE));
  const auto whole = gunzip_whole_file(dir / "images.gz");
  REQUIRE(whole.has_value() == whole_gunzip_available());
  if (whole) REQUIRE(to_vector(*whole) == std::vector<int64_t>(bytes.begin(), bytes.end()));
  // Not gzip, or not one clean member: left to zlib's stream.
  REQUIRE_FALSE(gunzip_whole_file(dir / "images").has_value());
  REQUIRE_FALSE(gunzip_whole_file(dir / "no-such-file.gz").has_value());
  auto corrupt = read_plain(dir / "images.gz");
  corrupt[corrupt.size() - 6] ^= 0xff;  // the CRC no longer matches
  write_plain(dir / "corrupt.gz", corrupt);
  REQUIRE_FALSE(gunzip_whole_file(dir / "corrupt.gz").has_value());
  // A trailer claiming 4 GiB for a file of a hundred bytes sets nothing aside.
  auto claims_more = read_plain(dir / "images.gz");
  std::fill(claims_more.end() - 4, claims_more.end(), 0xff);
  write_plain(dir / "claims-more.gz", claims_more);
  REQUIRE_FALSE(gunzip_whole_file(dir / "claims-more.gz").has_value());
  REQUIRE_THROWS_WITH(read_idx(dir / "claims-more.gz"), Contains("claims-more.gz"));

  // Two gzip members one after the other (what `cat a.gz b.gz` makes) are
  // one valid stream to gunzip: zlib reads them, with the same result.
  const std::vector<unsigned char> first(bytes.begin(), bytes.begin() + 50), second(bytes.begin() + 50, bytes.end());
  write_gz(dir / "first.gz", first);
  write_gz(dir / "second.gz", second);
  auto joined = read_plain(dir / "first.gz");
  const auto tail = read_plain(dir / "second.gz");
  joined.insert(joined.end(), tail.begin(), tail.end());
  write_plain(dir / "joined.gz", joined);
  REQUIRE_FALSE(gunzip_whole_file(dir / "joined.gz").has_value());
  for (const char* name : {"images.gz", "images", "joined.gz"}) {
    INFO(name);
    const at::Tensor t = read_idx(dir / name);
    REQUIRE(t.sizes().vec() == std::vector<int64_t>{3, 7, 5});
    REQUIRE(to_vector(t.flatten()) == std::vector<int64_t>(bytes.begin() + 16, bytes.end()));
  }
  REQUIRE_THROWS_WITH(read_idx(dir / "corrupt.gz"), Contains("corrupt.gz"));
}

TEST_CASE("read_idx errors name the file and the problem", "[data]") {
  DataFolder dir;

  SECTION("missing file") {
    const auto file = dir / "nothing-here-idx3-ubyte";
    REQUIRE_THROWS_AS(read_idx(file), DataError);
    REQUIRE_THROWS_WITH(read_idx(file), Contains(file.string()) && Contains("no such file"));
  }

  SECTION("not a regular file") {
    // Opening a FIFO would wait for a writer forever.
    REQUIRE(::mkfifo((dir / "fifo-idx3-ubyte").c_str(), 0600) == 0);
    REQUIRE_THROWS_WITH(read_idx(dir / "fifo-idx3-ubyte"), Contains("fifo-idx3-ubyte: not a regular file"));
  }

  SECTION("wrong magic") {
    auto bytes = idx_bytes({2, 2});
    bytes[0] = 0x12, bytes[1] = 0x34, bytes[2] = 0x56, bytes[3] = 0x78;
    write_plain(dir / "bad-magic", bytes);
    REQUIRE_THROWS_WITH(read_idx(dir / "bad-magic"), Contains((dir / "bad-magic").string()) &&
                                                         Contains("bad magic 0x12345678") &&
                                                         Contains("expected an IDX file, e.g. 0x00000803 for images"));
    // A gzip file of something else entirely (e.g. a PNG) is no better.
    write_gz(dir / "not-idx.gz", {0x89, 'P', 'N', 'G', 0, 0, 0, 0});
    REQUIRE_THROWS_WITH(read_idx(dir / "not-idx.gz"), Contains("not-idx.gz") && Contains("bad magic 0x89504E47"));
    // Too short to hold a magic number.
    write_plain(dir / "tiny", {0, 0});
    REQUIRE_THROWS_WITH(read_idx(dir / "tiny"), Contains("tiny") && Contains("expected an IDX file"));
  }

  SECTION("unsupported element type") {
    write_plain(dir / "floats", idx_bytes({1}, {0, 0, 0, 0}, 0x0D));
    REQUIRE_THROWS_WITH(read_idx(dir / "floats"), Contains("floats") && Contains("0x0D (float) is not supported"));
  }

  SECTION("truncated data, plain and gzipped") {
    auto bytes = idx_bytes({2, 3, 4});  // 24 bytes of data
    bytes.resize(bytes.size() - 4);
    write_plain(dir / "short", bytes);
    write_gz(dir / "short.gz", bytes);
    for (const char* name : {"short", "short.gz"}) {
      REQUIRE_THROWS_AS(read_idx(dir / name), DataError);
      REQUIRE_THROWS_WITH(read_idx(dir / name), Contains((dir / name).string()) &&
                                                    Contains("truncated: header says 24 bytes of data, file has 20"));
    }
  }

  SECTION("truncated header") {
    auto bytes = idx_bytes({2, 3, 4});
    bytes.resize(10);  // magic + 1.5 of 3 dimensions
    write_plain(dir / "short-header", bytes);
    REQUIRE_THROWS_WITH(read_idx(dir / "short-header"), Contains("short-header") && Contains("truncated"));
  }

  SECTION("a gzip stream cut short") {
    write_gz(dir / "cut.gz", idx_bytes({64, 64}));
    auto compressed = read_plain(dir / "cut.gz");
    compressed.resize(compressed.size() / 2);
    write_plain(dir / "cut.gz", compressed);
    REQUIRE_THROWS_WITH(read_idx(dir / "cut.gz"), Contains("cut.gz") && Contains("truncated: header says 4096 bytes"));
  }

  SECTION("a gzip file cut right after its header") {
    write_gz(dir / "stub.gz", idx_bytes({64, 64}));
    auto compressed = read_plain(dir / "stub.gz");
    compressed.resize(10);  // the gzip header alone: no byte of the deflate stream
    write_plain(dir / "stub.gz", compressed);
    REQUIRE_THROWS_WITH(
        read_idx(dir / "stub.gz"),
        Contains("stub.gz: truncated: the gzip stream ends after 0 bytes of data") && !Contains("0-byte file"));
  }

  SECTION("trailing data") {
    auto bytes = idx_bytes({2, 3});
    bytes.push_back(1), bytes.push_back(2), bytes.push_back(3);
    write_plain(dir / "long", bytes);
    write_gz(dir / "long.gz", bytes);
    for (const char* name : {"long", "long.gz"}) {
      REQUIRE_THROWS_WITH(read_idx(dir / name), Contains((dir / name).string()) &&
                                                    Contains("trailing data: header says 6 bytes of data, file has 9"));
    }
  }
}

// ---------------------------------------------------------------------------
// MNIST

TEST_CASE("MnistDataset reads a small generated MNIST folder", "[data]") {
  DataFolder dir;
  // 3 images of 2x5 pixels; the plain file is preferred over the .gz.
  std::vector<unsigned char> pixels(30, 0);
  pixels[0] = 255;  // image 0, top-left
  pixels[29] = 51;  // image 2, bottom-right
  write_plain(dir / "t10k-images-idx3-ubyte", idx_bytes({3, 2, 5}, pixels));
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({1, 2, 5}));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({3}, {9, 0, 4}));

  const MnistDataset mnist(dir.path, "test");
  REQUIRE(mnist.size() == 3);
  REQUIRE(mnist.pixels().sizes().vec() == std::vector<int64_t>{3, 1, 2, 5});
  REQUIRE(mnist.pixels().scalar_type() == at::kByte);
  const at::Tensor all = mnist.get({0, 1, 2}).at("input");
  REQUIRE(all.scalar_type() == at::kFloat);
  const float ink = static_cast<float>((1.0 - 0.1307) / 0.3081);
  const float background = static_cast<float>((0.0 - 0.1307) / 0.3081);
  REQUIRE(all[0][0][0][0].item<float>() == Approx(ink).epsilon(1e-6));
  REQUIRE(all[0][0][0][1].item<float>() == Approx(background).epsilon(1e-6));
  REQUIRE(all[2][0][1][4].item<float>() == Approx((0.2 - 0.1307) / 0.3081).epsilon(1e-5));

  const auto batch = mnist.get({2, 0, 2});
  REQUIRE(batch.size() == 2);
  REQUIRE(batch.at("input").sizes().vec() == std::vector<int64_t>{3, 1, 2, 5});
  REQUIRE(batch.at("target").scalar_type() == at::kLong);
  REQUIRE(to_vector(batch.at("target")) == std::vector<int64_t>{4, 9, 4});
  REQUIRE(batch.at("input")[1].equal(all[0]));
  REQUIRE(batch.at("input")[0].equal(all[2]));
  REQUIRE(mnist.get({}).at("input").sizes().vec() == std::vector<int64_t>{0, 1, 2, 5});
  REQUIRE_THROWS_AS(mnist.get({3}), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(mnist.get({-1}), exogym::sdk::InternalError);
}

TEST_CASE("MnistDataset errors", "[data]") {
  DataFolder dir;

  SECTION("missing files say where to get MNIST") {
    REQUIRE_THROWS_AS(MnistDataset(dir.path, "train"), DataError);
    REQUIRE_THROWS_WITH(MnistDataset(dir.path, "train"), Contains((dir / "train-images-idx3-ubyte(.gz)").string()) &&
                                                             Contains("no such file") && Contains("download MNIST") &&
                                                             Contains("point data.*.path at a folder with"));
    REQUIRE_THROWS_WITH(MnistDataset(dir / "no-such-folder", "test"),
                        Contains("t10k-images-idx3-ubyte(.gz): no such file"));
    write_plain(dir / "t10k-images-idx3-ubyte", idx_bytes({1, 2, 2}));
    REQUIRE_THROWS_WITH(MnistDataset(dir.path, "test"), Contains("t10k-labels-idx1-ubyte(.gz): no such file"));
  }

  SECTION("no path") { REQUIRE_THROWS_WITH(MnistDataset(fs::path(), "train"), Contains("mnist needs a path")); }

  SECTION("splits are train and test only") {
    REQUIRE_THROWS_AS(MnistDataset(dir.path, "val"), ConfigError);
    REQUIRE_THROWS_WITH(MnistDataset(dir.path, "val"), Contains("\"train\" and \"test\", got \"val\""));
  }

  SECTION("image and label counts must agree") {
    write_plain(dir / "train-images-idx3-ubyte", idx_bytes({3, 2, 2}));
    write_plain(dir / "train-labels-idx1-ubyte", idx_bytes({2}));
    REQUIRE_THROWS_WITH(MnistDataset(dir.path, "train"), Contains("holds 3 images but") && Contains("holds 2 labels"));
  }

  SECTION("shapes") {
    write_plain(dir / "train-images-idx3-ubyte", idx_bytes({3, 4}));
    write_plain(dir / "train-labels-idx1-ubyte", idx_bytes({3}));
    REQUIRE_THROWS_WITH(MnistDataset(dir.path, "train"),
                        Contains("train-images-idx3-ubyte") &&
                            Contains("expected images shaped [count, rows, columns]") && Contains("[3, 4]"));
  }
}

TEST_CASE("MNIST test split: counts and labels", "[data]") {
  const fs::path dir = exogym::test::mnist_dir();
  const MnistDataset test(dir, "test");
  REQUIRE(test.size() == 10000);
  REQUIRE(test.pixels().sizes().vec() == std::vector<int64_t>{10000, 1, 28, 28});
  REQUIRE(label_counts(test.labels()) == std::vector<int64_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009});
  REQUIRE(to_vector(test.labels().slice(0, 0, 10)) == std::vector<int64_t>{7, 2, 1, 0, 4, 1, 4, 9, 5, 9});
  const auto batch = test.get({0, 9999});
  REQUIRE(batch.at("input").sizes().vec() == std::vector<int64_t>{2, 1, 28, 28});
  REQUIRE(batch.at("target")[0].item<int64_t>() == 7);
  // Bit-identical to normalizing with tensor ops (ToTensor + Normalize).
  std::vector<int64_t> every(10000);
  std::iota(every.begin(), every.end(), 0);
  const at::Tensor images = test.get(every).at("input");
  const at::Tensor raw = read_idx(dir / "t10k-images-idx3-ubyte.gz");
  REQUIRE(images.equal(raw.to(at::kFloat).div(255).sub(0.1307).div(0.3081).unsqueeze(1)));
  // Pixels are 0..255, so normalized values span exactly this range.
  REQUIRE(images.min().item<float>() == Approx(-0.1307 / 0.3081));
  REQUIRE(images.max().item<float>() == Approx((1 - 0.1307) / 0.3081));
}

// Inflating 47 MB of images, then normalizing all of them through get().
TEST_CASE("MNIST train split: counts, labels and normalization", "[data]") {
  const fs::path dir = exogym::test::mnist_dir();
  const MnistDataset train(dir, "train");
  REQUIRE(train.size() == 60000);
  REQUIRE(train.pixels().sizes().vec() == std::vector<int64_t>{60000, 1, 28, 28});
  REQUIRE(label_counts(train.labels()) ==
          std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949});
  REQUIRE(to_vector(train.labels().slice(0, 0, 10)) == std::vector<int64_t>{5, 0, 4, 1, 9, 2, 1, 3, 1, 4});
  // 0.1307 and 0.3081 are the training set's pixel mean and std, so the
  // normalized training set has mean ~0 and std ~1.
  std::vector<int64_t> every(60000);
  std::iota(every.begin(), every.end(), 0);
  const at::Tensor images = train.get(every).at("input");
  REQUIRE(std::abs(images.mean().item<double>()) < 1e-3);
  REQUIRE(images.std().item<double>() == Approx(1.0).epsilon(1e-3));
}

// ---------------------------------------------------------------------------
// Synthetic dataset and registry

TEST_CASE("SyntheticDataset: deterministic, shaped, learnable, splits differ", "[data]") {
  SyntheticOptions options;
  options.seed = 5;
  const SyntheticDataset train(options, "train");
  const SyntheticDataset again(options, "train");
  const SyntheticDataset test(options, "test");
  const SyntheticDataset val(options, "val");

  REQUIRE(train.size() == 4096);
  REQUIRE(train.inputs().sizes().vec() == std::vector<int64_t>{4096, 32});
  REQUIRE(train.inputs().scalar_type() == at::kFloat);
  REQUIRE(train.targets().scalar_type() == at::kLong);
  REQUIRE(train.targets().min().item<int64_t>() == 0);
  REQUIRE(train.targets().max().item<int64_t>() == 3);
  REQUIRE(train.inputs().equal(again.inputs()));
  REQUIRE(train.targets().equal(again.targets()));

  REQUIRE(train.centroids().equal(test.centroids()));
  REQUIRE(train.centroids().equal(val.centroids()));
  REQUIRE_FALSE(train.inputs().equal(test.inputs()));
  REQUIRE_FALSE(test.inputs().equal(val.inputs()));
  options.seed = 6;
  REQUIRE_FALSE(SyntheticDataset(options, "train").centroids().equal(train.centroids()));

  // x = centroid[y] + 0.5·noise: the residual has std ~0.5.
  const at::Tensor residual = train.inputs() - train.centroids().index_select(0, train.targets());
  REQUIRE(residual.std().item<double>() == Approx(0.5).epsilon(0.02));
  // Learnable: the nearest centroid predicts the test labels.
  const at::Tensor nearest = at::cdist(test.inputs(), test.centroids()).argmin(1);
  REQUIRE(nearest.eq(test.targets()).to(at::kFloat).mean().item<double>() > 0.95);

  const auto batch = test.get({3, 1, 4, 1});
  REQUIRE(batch.at("input").sizes().vec() == std::vector<int64_t>{4, 32});
  REQUIRE(batch.at("target").sizes().vec() == std::vector<int64_t>{4});
  REQUIRE(batch.at("input")[0].equal(test.inputs()[3]));
  REQUIRE(batch.at("target")[3].item<int64_t>() == test.targets()[1].item<int64_t>());
  REQUIRE_THROWS_AS(test.get({4096}), exogym::sdk::InternalError);

  REQUIRE_THROWS_AS(SyntheticDataset(options, "validation"), ConfigError);
}

TEST_CASE("Built-in dataset registry", "[data]") {
  REQUIRE(builtin_dataset_names() == std::vector<std::string>{"mnist", "synthetic", "tensors", "text-char", "tokens"});
  REQUIRE_FALSE(builtin_dataset_options("shakespeare").has_value());
  REQUIRE(builtin_dataset_options("mnist").value().empty());
  const auto specs = builtin_dataset_options("synthetic").value();
  std::vector<std::string> names;
  for (const auto& spec : specs) names.push_back(spec.name);
  REQUIRE(names == std::vector<std::string>{"num_examples", "features", "classes", "noise", "seed"});
  REQUIRE(specs[0].default_value == 4096);
  REQUIRE(specs[4].default_value.is_null());

  exogym::sdk::DatasetRequest request;
  request.split = "val";
  request.seed = 11;
  REQUIRE(make_builtin_dataset("shakespeare", nlohmann::json::object(), request) == nullptr);

  // A null seed means the run's seed.
  const nlohmann::json options = {
      {"num_examples", 100}, {"features", 3}, {"classes", 2}, {"noise", 0.1}, {"seed", nullptr}};
  const auto dataset = make_builtin_dataset("synthetic", options, request);
  REQUIRE(dataset != nullptr);
  REQUIRE(dataset->size() == 100);
  SyntheticOptions expected_options;
  expected_options.num_examples = 100, expected_options.features = 3, expected_options.classes = 2;
  expected_options.noise = 0.1, expected_options.seed = 11;
  const SyntheticDataset expected(expected_options, "val");
  REQUIRE(dataset->get({0, 99}).at("input").equal(expected.get({0, 99}).at("input")));
  auto seeded = options;
  seeded["seed"] = 12;
  REQUIRE_FALSE(
      make_builtin_dataset("synthetic", seeded, request)->get({0}).at("input").equal(expected.get({0}).at("input")));

  const fs::path dir = exogym::test::mnist_dir();
  if (!dir.empty()) {
    request.path = dir;
    request.split = "test";
    const auto mnist = make_builtin_dataset("mnist", nlohmann::json::object(), request);
    REQUIRE(mnist->size() == 10000);
    REQUIRE(mnist->get({0}).at("target")[0].item<int64_t>() == 7);
  }
}
