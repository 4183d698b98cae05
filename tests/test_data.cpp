// The data layer: IDX reading, MNIST, the synthetic dataset, IID sharding and
// the built-in dataset registry.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cdist.h>
#include <ATen/ops/randperm.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/data/idx.h"
#include "exogym/runtime/data/mnist.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/data/synthetic.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using namespace exogym::runtime::data;
using Catch::Contains;
using exogym::sdk::ConfigError;
using exogym::sdk::DataError;

namespace {

// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("exogym-test-data-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
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

std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  const at::Tensor t = tensor.to(at::kLong).contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

}  // namespace

// ---------------------------------------------------------------------------
// IDX

TEST_CASE("read_idx reads plain and gzipped IDX files", "[data]") {
  TempDir dir;
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

TEST_CASE("read_idx errors name the file and the problem", "[data]") {
  TempDir dir;

  SECTION("missing file") {
    const auto file = dir / "nothing-here-idx3-ubyte";
    REQUIRE_THROWS_AS(read_idx(file), DataError);
    REQUIRE_THROWS_WITH(read_idx(file), Contains(file.string()) && Contains("no such file"));
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
  TempDir dir;
  // 3 images of 2x5 pixels; the plain file is preferred over the .gz.
  std::vector<unsigned char> pixels(30, 0);
  pixels[0] = 255;  // image 0, top-left
  pixels[29] = 51;  // image 2, bottom-right
  write_plain(dir / "t10k-images-idx3-ubyte", idx_bytes({3, 2, 5}, pixels));
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({1, 2, 5}));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({3}, {9, 0, 4}));

  const MnistDataset mnist(dir.path, "test");
  REQUIRE(mnist.size() == 3);
  REQUIRE(mnist.images().sizes().vec() == std::vector<int64_t>{3, 1, 2, 5});
  REQUIRE(mnist.images().scalar_type() == at::kFloat);
  const float ink = static_cast<float>((1.0 - 0.1307) / 0.3081);
  const float background = static_cast<float>((0.0 - 0.1307) / 0.3081);
  REQUIRE(mnist.images()[0][0][0][0].item<float>() == Approx(ink).epsilon(1e-6));
  REQUIRE(mnist.images()[0][0][0][1].item<float>() == Approx(background).epsilon(1e-6));
  REQUIRE(mnist.images()[2][0][1][4].item<float>() == Approx((0.2 - 0.1307) / 0.3081).epsilon(1e-5));

  const auto batch = mnist.get({2, 0, 2});
  REQUIRE(batch.size() == 2);
  REQUIRE(batch.at("input").sizes().vec() == std::vector<int64_t>{3, 1, 2, 5});
  REQUIRE(batch.at("target").scalar_type() == at::kLong);
  REQUIRE(to_vector(batch.at("target")) == std::vector<int64_t>{4, 9, 4});
  REQUIRE(batch.at("input")[1].equal(mnist.images()[0]));
  REQUIRE(batch.at("input")[0].equal(mnist.images()[2]));
  REQUIRE(mnist.get({}).at("input").sizes().vec() == std::vector<int64_t>{0, 1, 2, 5});
  REQUIRE_THROWS_AS(mnist.get({3}), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(mnist.get({-1}), exogym::sdk::InternalError);
}

TEST_CASE("MnistDataset errors", "[data]") {
  TempDir dir;

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
  REQUIRE(test.images().sizes().vec() == std::vector<int64_t>{10000, 1, 28, 28});
  REQUIRE(label_counts(test.labels()) == std::vector<int64_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009});
  REQUIRE(to_vector(test.labels().slice(0, 0, 10)) == std::vector<int64_t>{7, 2, 1, 0, 4, 1, 4, 9, 5, 9});
  const auto batch = test.get({0, 9999});
  REQUIRE(batch.at("input").sizes().vec() == std::vector<int64_t>{2, 1, 28, 28});
  REQUIRE(batch.at("target")[0].item<int64_t>() == 7);
  // Bit-identical to normalizing with tensor ops (ToTensor + Normalize).
  const at::Tensor raw = read_idx(dir / "t10k-images-idx3-ubyte.gz");
  REQUIRE(test.images().equal(raw.to(at::kFloat).div(255).sub(0.1307).div(0.3081).unsqueeze(1)));
  // Pixels are 0..255, so normalized values span exactly this range.
  REQUIRE(test.images().min().item<float>() == Approx(-0.1307 / 0.3081));
  REQUIRE(test.images().max().item<float>() == Approx((1 - 0.1307) / 0.3081));
}

// About 0.3 s of gunzip plus normalization on one core (see the report).
TEST_CASE("MNIST train split: counts, labels and normalization", "[data]") {
  const fs::path dir = exogym::test::mnist_dir();
  const MnistDataset train(dir, "train");
  REQUIRE(train.size() == 60000);
  REQUIRE(train.images().sizes().vec() == std::vector<int64_t>{60000, 1, 28, 28});
  REQUIRE(label_counts(train.labels()) ==
          std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949});
  REQUIRE(to_vector(train.labels().slice(0, 0, 10)) == std::vector<int64_t>{5, 0, 4, 1, 9, 2, 1, 3, 1, 4});
  // 0.1307 and 0.3081 are the training set's pixel mean and std, so the
  // normalized training set has mean ~0 and std ~1.
  REQUIRE(std::abs(train.images().mean().item<double>()) < 1e-3);
  REQUIRE(train.images().std().item<double>() == Approx(1.0).epsilon(1e-3));
}

// ---------------------------------------------------------------------------
// IID sampler

TEST_CASE("IidSampler: node batches at a step are the K=1 big batch, split every K-th", "[data]") {
  const int64_t n = 1000;
  const IidSampler four(n, 4, 8, 42);
  const IidSampler one(n, 1, 32, 42);
  REQUIRE(four.steps_per_epoch() == 31);
  REQUIRE(one.steps_per_epoch() == 31);
  for (int64_t step : {0, 1, 17, 30, 31, 45, 100}) {
    INFO("step " << step);
    const auto big = one.batch_indices(0, step);
    std::vector<int64_t> all;
    for (int r = 0; r < 4; ++r) {
      const auto batch = four.batch_indices(r, step);
      REQUIRE(batch.size() == 8);
      // Node r takes every 4th index of the big batch, starting at r.
      for (int k = 0; k < 8; ++k) REQUIRE(batch[k] == big[r + 4 * k]);
      all.insert(all.end(), batch.begin(), batch.end());
    }
    // Disjoint: the union has K·B distinct indices.
    REQUIRE(std::set<int64_t>(all.begin(), all.end()).size() == 32);
    auto sorted_big = big;
    std::sort(all.begin(), all.end());
    std::sort(sorted_big.begin(), sorted_big.end());
    REQUIRE(all == sorted_big);
  }
}

TEST_CASE("IidSampler: follows the epoch permutation, which ignores K and B", "[data]") {
  const int64_t n = 1000;
  const IidSampler sampler(n, 4, 8, 7);
  REQUIRE(sampler.epoch_of(0) == 0);
  REQUIRE(sampler.epoch_of(30) == 0);
  REQUIRE(sampler.epoch_of(31) == 1);
  REQUIRE(sampler.epoch_of(62) == 2);

  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto perm = IidSampler::permutation(n, 7, epoch);
    REQUIRE(perm.size() == n);
    REQUIRE(std::set<int64_t>(perm.begin(), perm.end()).size() == n);
    REQUIRE(*std::min_element(perm.begin(), perm.end()) == 0);
    REQUIRE(*std::max_element(perm.begin(), perm.end()) == n - 1);
    // Every one of the epoch's first steps_per_epoch·K·B positions is used
    // exactly once, by the documented node and slot.
    std::vector<int> uses(n, 0);
    for (int64_t s = 0; s < sampler.steps_per_epoch(); ++s) {
      for (int r = 0; r < 4; ++r) {
        const auto batch = sampler.batch_indices(r, epoch * sampler.steps_per_epoch() + s);
        for (int k = 0; k < 8; ++k) {
          REQUIRE(batch[k] == perm[s * 32 + r + 4 * k]);
          ++uses[batch[k]];
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) REQUIRE(uses[perm[i]] == (i < 31 * 32 ? 1 : 0));
  }

  // A different permutation each epoch.
  REQUIRE(IidSampler::permutation(n, 7, 0) != IidSampler::permutation(n, 7, 1));
  REQUIRE(sampler.batch_indices(0, 0) != sampler.batch_indices(0, 31));
  // A different seed gives a different order.
  REQUIRE(IidSampler::permutation(n, 7, 0) != IidSampler::permutation(n, 8, 0));
  // The permutation is randperm from a CPU generator seeded with seed + epoch,
  // as torch's DistributedSampler after set_epoch(epoch).
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7 + 2);
  REQUIRE(to_vector(at::randperm(n, generator, at::kLong)) == IidSampler::permutation(n, 7, 2));

  // Independent of K and B: a single node with batch 1 walks the permutation.
  const IidSampler single(n, 1, 1, 7);
  const auto perm0 = IidSampler::permutation(n, 7, 0);
  for (int64_t t = 0; t < 50; ++t) REQUIRE(single.batch_indices(0, t) == std::vector<int64_t>{perm0[t]});
  const IidSampler odd(n, 3, 5, 7);
  for (int r = 0; r < 3; ++r) {
    const auto batch = odd.batch_indices(r, 2);
    for (int k = 0; k < 5; ++k) REQUIRE(batch[k] == perm0[2 * 15 + r + 3 * k]);
  }
}

TEST_CASE("IidSampler: deterministic across instances and microbatches are slices", "[data]") {
  const IidSampler a(60000, 8, 64, 42);
  const IidSampler b(60000, 8, 64, 42);
  for (int64_t step : {0, 5, 116, 117, 500}) {
    for (int r = 0; r < 8; ++r) REQUIRE(a.batch_indices(r, step) == b.batch_indices(r, step));
  }
  // Asking out of order (an epoch evicted from the cache and recomputed)
  // gives the same answer.
  const auto early = a.batch_indices(3, 1);
  for (int64_t step = 0; step < 20 * a.steps_per_epoch(); step += a.steps_per_epoch()) a.batch_indices(0, step);
  REQUIRE(a.batch_indices(3, 1) == early);

  // Microbatch j (size 16) of node r's batch is its slice [16·j, 16·(j+1)),
  // i.e. permutation positions s·K·B + r + K·(16·j + i).
  const auto perm = IidSampler::permutation(60000, 42, 0);
  const auto batch = a.batch_indices(5, 3);
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 16; ++i) REQUIRE(batch[j * 16 + i] == perm[3 * 8 * 64 + 5 + 8 * (j * 16 + i)]);
  }
}

TEST_CASE("IidSampler: many threads get the sequential answers", "[data]") {
  const int nodes = 16;
  const int64_t steps = 3 * IidSampler(5000, nodes, 16, 3).steps_per_epoch() + 2;  // crosses epoch boundaries
  const IidSampler reference(5000, nodes, 16, 3);
  std::vector<std::vector<std::vector<int64_t>>> expected(nodes);
  for (int r = 0; r < nodes; ++r) {
    for (int64_t t = 0; t < steps; ++t) expected[r].push_back(reference.batch_indices(r, t));
  }

  const IidSampler shared(5000, nodes, 16, 3);
  std::vector<std::vector<std::vector<int64_t>>> got(nodes);
  std::vector<std::thread> threads;
  for (int r = 0; r < nodes; ++r) {
    threads.emplace_back([&, r] {
      // Odd ranks walk backwards so that threads sit in different epochs.
      for (int64_t i = 0; i < steps; ++i) got[r].push_back(shared.batch_indices(r, r % 2 ? steps - 1 - i : i));
      if (r % 2) std::reverse(got[r].begin(), got[r].end());
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(got == expected);
}

TEST_CASE("IidSampler: K = 1024 nodes", "[data]") {
  const IidSampler sampler(60000, 1024, 8, 1);
  REQUIRE(sampler.steps_per_epoch() == 7);
  std::vector<int64_t> all;
  for (int r = 0; r < 1024; ++r) {
    const auto batch = sampler.batch_indices(r, 6);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  REQUIRE(std::set<int64_t>(all.begin(), all.end()).size() == 8192);
}

TEST_CASE("IidSampler: errors", "[data]") {
  REQUIRE_THROWS_AS(IidSampler(100, 4, 32, 0), ConfigError);
  REQUIRE_THROWS_WITH(IidSampler(100, 4, 32, 0), Contains("train.batch_size") &&
                                                     Contains("the training set has 100 examples") &&
                                                     Contains("4 × 32 = 128"));
  REQUIRE_NOTHROW(IidSampler(128, 4, 32, 0));
  const IidSampler sampler(128, 4, 32, 0);
  REQUIRE_THROWS_AS(sampler.batch_indices(4, 0), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(sampler.batch_indices(0, -1), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(IidSampler(128, 0, 32, 0), exogym::sdk::InternalError);
}

TEST_CASE("validation_indices: a fixed subset", "[data]") {
  const auto a = validation_indices(10000, 1024);
  REQUIRE(a.size() == 1024);
  REQUIRE(std::set<int64_t>(a.begin(), a.end()).size() == 1024);
  REQUIRE(*std::max_element(a.begin(), a.end()) < 10000);
  REQUIRE(*std::min_element(a.begin(), a.end()) >= 0);
  REQUIRE(validation_indices(10000, 1024) == a);
  // A random subset, not the first examples (files are often sorted).
  REQUIRE(*std::max_element(a.begin(), a.end()) > 5000);
  // A smaller size is a prefix of the same permutation.
  const auto small = validation_indices(10000, 10);
  REQUIRE(std::equal(small.begin(), small.end(), a.begin()));
  REQUIRE(validation_indices(10000, 10000).size() == 10000);
  REQUIRE(validation_indices(10, 0).empty());
  REQUIRE_THROWS_AS(validation_indices(10000, 10001), ConfigError);
  REQUIRE_THROWS_WITH(validation_indices(10000, 10001),
                      Contains("eval.size") && Contains("10001") && Contains("10000"));
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
  REQUIRE(builtin_dataset_names() == std::vector<std::string>{"mnist", "synthetic", "text-char", "tokens"});
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
