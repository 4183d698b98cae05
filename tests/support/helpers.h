#pragma once
// Shared test helpers: temporary folders, running a manifest in-process,
// reading model.pt back.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/train/training.h"
#include "exogym/sdk/comm.h"

namespace exogym::test {

// small_manifest's MLP, 32 -> 32 -> 4: its parameters, in 4 tensors.
constexpr double kSmallMlpParameters = 32 * 32 + 32 + 4 * 32 + 4;  // 1,188

// A fresh folder under the system temp dir, removed at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The repository's MNIST copy (always present), or ../shared/data/mnist.
std::filesystem::path mnist_dir();

// A loader that finds the build tree's plugins and the test plugins.
runtime::plugin::PluginLoader& test_loader();

// A text file's lines, and its whole text.
std::vector<std::string> read_lines(const std::filesystem::path& file);
// The lines of `file`, sorted (for files whose nodes write rows in any order).
std::vector<std::string> sorted_lines(const std::filesystem::path& file);
std::string read_text(const std::filesystem::path& file);

// A CSV file with a header line, as one {column: cell} map per row.
std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& file);

// A small manifest: `nodes` MLP nodes (no dropout) on the synthetic dataset,
// strategy allreduce with plain SGD. Tests patch what they need.
nlohmann::json small_manifest(int nodes);

// The ConfigError's message when parsing `manifest` (base folder /tmp) and
// checking its first run as exogym-run does before training (check_run),
// or "(no error)".
std::string check_run_error(const nlohmann::json& manifest);

// Parses `manifest` (base folder `dir`) and trains its single run quietly
// into dir/run, on `cores` cores (0: all this process may use).
runtime::train::TrainingResult run_json(const nlohmann::json& manifest, const std::filesystem::path& dir, int cores = 0,
                                        int64_t timing_mark_step = -1);

// model.pt as {name: tensor}.
std::map<std::string, at::Tensor> load_model_pt(const std::filesystem::path& file);

// Runs body(rank, comm) on K node threads of a simulated cluster with the
// given parallelism; fails the test (instead of hanging it) if the cluster
// does not finish within a minute.
void run_nodes(int K, int parallelism, const std::function<void(int, sdk::Communicator&)>& body);

// Largest absolute difference over the tensors both maps hold (and they must
// hold the same names).
double max_abs_diff(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b);

// Whether the two dicts hold bit-identical tensors.
bool bit_identical(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b);

// Whether a and b hold the same bits (shape, dtype and bytes; both
// undefined counts as the same).
bool same_bits(const at::Tensor& a, const at::Tensor& b);

// Tensors of these values, and a tensor's values as integers.
at::Tensor floats(std::vector<float> values);
at::Tensor doubles(std::vector<double> values);
std::vector<int64_t> to_vector(const at::Tensor& tensor);

// Writes `bytes` to `file`, replacing what it held.
void write_bytes(const std::filesystem::path& file, const std::string& bytes);

// The optimizer spec {"name": "sgd", "lr": lr}.
nlohmann::json sgd_spec(double lr);

// A run folder's summary.json.
nlohmann::json summary_of(const std::filesystem::path& run);

// How many times `what` occurs in `text` (overlapping ones too).
size_t occurrences(const std::string& text, const std::string& what);

// The client each node trained at each step, from a run's metrics.csv
// ("client" rows): {step: {node: client}}.
std::map<int64_t, std::map<int, int>> clients_trained(const std::filesystem::path& run);

// The ConfigError parsing `manifest` (its folder `dir`) throws, or "(no error)".
std::string parse_error(const nlohmann::json& manifest, const std::filesystem::path& dir);

}  // namespace exogym::test
