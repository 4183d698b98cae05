#include "helpers.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>

#include "exogym/runtime/output/model_pt.h"
#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/sdk/error.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ =
      fs::temp_directory_path() / ("exogym-test-" + tag + "-" + std::to_string(rd()) + "-" + std::to_string(counter++));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path mnist_dir() {
  fs::path shared = fs::path(EXOGYM_SOURCE_DIR) / ".." / "shared" / "data" / "mnist";
  if (fs::exists(shared / "train-images-idx3-ubyte.gz")) return fs::canonical(shared);
  return fs::path(EXOGYM_SOURCE_DIR) / "examples" / "data" / "mnist";
}

runtime::plugin::PluginLoader& test_loader() {
  static runtime::plugin::PluginLoader loader(
      {fs::path(EXOGYM_BINARY_DIR) / "lib" / "exogym" / "plugins", fs::path(EXOGYM_TEST_PLUGIN_DIR)});
  return loader;
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::map<std::string, std::string>> read_csv(const fs::path& file) {
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  auto lines = read_lines(file);
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  const auto header = split(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto cells = split(lines[i]);
    if (cells.size() != header.size()) throw std::runtime_error(file.string() + ": ragged row " + std::to_string(i));
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < header.size(); ++c) row[header[c]] = cells[c];
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json small_manifest(int nodes) {
  return {
      {"name", "test"},
      {"seed", 7},
      {"nodes", nodes},
      // Bit-reproducibility holds with one intra-op thread per node.
      {"threads", 1},
      {"model", {{"plugin", "mlp"}, {"options", {{"input_size", 32}, {"hidden", {32}}, {"num_classes", 4}}}}},
      {"strategy", {{"plugin", "allreduce"}, {"options", {{"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}}}}},
      {"data",
       {{"train", {{"dataset", "synthetic"}, {"options", {{"num_examples", 2048}, {"features", 32}, {"classes", 4}}}}},
        {"val",
         {{"dataset", "synthetic"},
          {"split", "test"},
          {"options", {{"num_examples", 512}, {"features", 32}, {"classes", 4}}}}}}},
      {"train", {{"max_steps", 20}, {"batch_size", 16}}},
      {"eval", {{"interval", 10}, {"size", 256}}},
      {"output", {{"dir", "out"}}},
  };
}

std::string check_run_error(const nlohmann::json& manifest) {
  try {
    const runtime::manifest::Manifest m = runtime::manifest::parse_manifest(manifest, "/tmp", "test").runs.at(0);
    runtime::train::check_run(m, test_loader());
  } catch (const sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

runtime::train::TrainingResult run_json(const nlohmann::json& manifest, const fs::path& dir, int cores,
                                        int64_t timing_mark_step) {
  auto set = runtime::manifest::parse_manifest(manifest, dir, "test");
  runtime::train::TrainingOptions options;
  options.progress = runtime::output::Progress::Mode::Quiet;
  options.run_dir = dir / "run";
  options.cores = cores;
  options.timing_mark_step = timing_mark_step;
  return runtime::train::train_run(set.runs.at(0), test_loader(), options);
}

std::map<std::string, at::Tensor> load_model_pt(const fs::path& file) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, tensor] : runtime::output::read_model_pt(file)) out[name] = std::move(tensor);
  return out;
}

void run_nodes(int K, int parallelism, const std::function<void(int, sdk::Communicator&)>& body) {
  runtime::train::Cluster cluster(K, parallelism);
  auto future = std::async(std::launch::async, [&] {
    cluster.run([&](int rank, runtime::threads::NodeSlot& slot) {
      at::set_num_threads(1);
      auto comm = cluster.group().communicator(rank, &slot);
      slot.acquire();
      body(rank, *comm);
    });
  });
  if (future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    cluster.abort_signal().trigger("test timeout");
    future.wait();
    FAIL("cluster did not finish within 60 s");
  }
  future.get();
}

double max_abs_diff(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (const auto& [name, tensor] : a) {
    auto it = b.find(name);
    if (it == b.end()) return INFINITY;
    worst = std::max(worst, (tensor.to(at::kDouble) - it->second.to(at::kDouble)).abs().max().item<double>());
  }
  return worst;
}

bool bit_identical(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a) {
    auto it = b.find(name);
    if (it == b.end() || !at::equal(tensor, it->second)) return false;
  }
  return true;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

at::Tensor floats(std::vector<float> values) { return at::tensor(values, at::kFloat); }

at::Tensor doubles(std::vector<double> values) { return at::tensor(values, at::kDouble); }

std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  const at::Tensor t = tensor.to(at::kLong).contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

nlohmann::json sgd_spec(double lr) { return {{"name", "sgd"}, {"lr", lr}}; }

nlohmann::json summary_of(const std::filesystem::path& run) {
  return nlohmann::json::parse(read_text(run / "summary.json"));
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::map<int64_t, std::map<int, int>> clients_trained(const std::filesystem::path& run) {
  std::map<int64_t, std::map<int, int>> out;
  for (const auto& row : read_csv(run / "metrics.csv")) {
    if (row.at("name") == "client")
      out[std::stoll(row.at("step"))][std::stoi(row.at("node"))] = static_cast<int>(std::stod(row.at("value")));
  }
  return out;
}

std::string parse_error(const nlohmann::json& manifest, const std::filesystem::path& dir) {
  try {
    runtime::manifest::parse_manifest(manifest, dir, "test");
  } catch (const sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> sorted_lines(const std::filesystem::path& file) {
  std::vector<std::string> lines = read_lines(file);
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace exogym::test
