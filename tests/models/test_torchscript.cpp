// A PyTorch user's model and data without C++ (docs/from-pytorch.md): the
// built-in model "torchscript" and dataset "tensors" on files written by the
// real PyTorch and NumPy (tests/models/torchscript_fixtures.py, Debian's
// python3-torch), and model.pt loaded back into the module it came from.
#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/output/model_pt.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const json kMlpOptions = {{"input_size", 32}, {"hidden", {32}}, {"num_classes", 4}};
constexpr uint64_t kSeed = 11;

// Runs the fixtures script with the Python that has torch; its output.
std::string python(const std::string& args, const fs::path& log) {
  const std::string command = std::string(EXOGYM_SOURCE_DIR) + "/tests/support/python_with.sh numpy,torch " +
                              EXOGYM_SOURCE_DIR + "/tests/models/torchscript_fixtures.py " + args + " > " +
                              log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  INFO(read_text(log));
  REQUIRE(status == 0);  // tools/dev test installs python3-torch, python3-torchvision
  return read_text(log);
}

// The fixtures, written once per test process, with the built-in mlp's
// initial weights (node 0's, drawn from kSeed) in mlp.pt.
const fs::path& fixtures() {
  static TempDir dir("torchscript");
  static bool written = false;
  if (!written) {
    auto plugin = test_loader().load("model", "mlp", "model.plugin", fs::current_path());
    at::manual_seed(kSeed);
    const auto model = plugin->create_model(plugin->validate(kMlpOptions, "model.options"));
    model->init_parameters();
    runtime::output::NamedTensors init;
    for (const auto& item : model->network().named_parameters()) init.emplace_back(item.key(), item.value());
    runtime::output::write_model_pt(dir / "init.pt", init);
    python("export " + (dir / "files").string() + " " + (dir / "init.pt").string(), dir / "export.log");
    written = true;
  }
  static const fs::path files = dir / "files";
  return files;
}

json tensors(const std::string& split) {
  return {{"dataset", "tensors"}, {"path", (fixtures() / "data" / split).string()}};
}

// DiLoCo on 4 nodes over the fixtures' blobs, with `model`.
json manifest(const json& model) {
  json m = small_manifest(4);
  m["seed"] = kSeed;
  m["model"] = model;
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 5}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
  m["data"] = {{"train", tensors("train")}, {"val", tensors("test")}};
  m["compute"] = {{"step_time", "10ms"}};
  m["train"]["max_steps"] = 100;
  m["eval"] = {{"interval", 50}, {"size", 256}};
  return m;
}

json script(const std::string& file, json options = json::object()) {
  options["path"] = (fixtures() / file).string();
  return {{"plugin", "torchscript"}, {"options", options}};
}

}  // namespace

TEST_CASE("a TorchScript MLP trains as the built-in mlp with the same weights, bit for bit", "[torchscript]") {
  TempDir dir("torchscript-mlp");
  // Per node, as the TorchScript model runs (a stacked run's loss column
  // reduces each node's batch in another order).
  json builtin_manifest = manifest({{"plugin", "mlp"}, {"options", kMlpOptions}});
  builtin_manifest["execution"] = "per_node";
  const fs::path builtin = train_in(builtin_manifest, dir, "builtin");
  const fs::path scripted = train_in(manifest(script("mlp.pt")), dir, "scripted");
  // The same names, the same arithmetic, the same bits; only the model's
  // plugin differs in config.json and summary.json.
  CHECK(read_text(builtin / "model.pt") == read_text(scripted / "model.pt"));
  for (const char* csv : {"train.csv", "validation.csv", "comm.csv"})
    CHECK(read_text(builtin / csv) == read_text(scripted / csv));
  // model.pt loads back into the PyTorch module, strictly, and predicts.
  const std::string out =
      python("check " + (scripted / "model.pt").string() + " " + fixtures().string(), dir / "check.log");
  CHECK_THAT(out, Catch::StartsWith("accuracy "));
  CHECK(std::stod(out.substr(9)) > 0.9);
}

TEST_CASE("traced modules, BatchNorm buffers, returned losses and safetensors data train and resume exactly",
          "[torchscript]") {
  TempDir dir("torchscript-kinds");
  SECTION("torch.jit.trace's MLP is the scripted one") {
    CHECK(read_text(train_in(manifest(script("traced.pt")), dir, "traced") / "model.pt") ==
          read_text(train_in(manifest(script("mlp.pt")), dir, "scripted") / "model.pt"));
  }
  SECTION("a CNN's BatchNorm statistics are kept per node and checkpointed") {
    json m = manifest(script("cnn.pt"));
    m["checkpoint"] = {{"interval", 30}};
    const fs::path run = train_in(m, dir, "cnn");
    const auto saved = runtime::output::read_model_pt(run / "model.pt");
    bool has_running_mean = false;
    for (const auto& [name, tensor] : saved) has_running_mean = has_running_mean || name == "bn.running_mean";
    CHECK(has_running_mean);
    m["train"]["max_steps"] = 100;
    json whole = m;
    const fs::path parts = dir / "cnn-parts" / "run";
    m["train"]["max_steps"] = 60;
    train_into(m, parts);
    resume_in(parts, {"train.max_steps=100"});
    require_same_run(run, parts);
  }
  SECTION("forward(input, target) returning the loss") {
    json m = manifest(script("returned.pt", {{"inputs", {"input", "target"}}, {"loss", "returned"}}));
    const json summary = json::parse(read_text(train_in(m, dir, "returned") / "summary.json"));
    CHECK(summary["last_train_loss"].get<double>() < 0.5);
  }
  SECTION("one safetensors file, cut by split_fraction") {
    json m = manifest(script("mlp.pt"));
    const json data = {{"dataset", "tensors"},
                       {"path", (fixtures() / "data.safetensors").string()},
                       {"options", {{"split_fraction", 512.0 / 768.0}}}};
    m["data"] = {{"train", data}, {"val", data}};
    m["data"]["val"]["split"] = "test";
    // The same examples as the .npy folders: the same run.
    CHECK(read_text(train_in(m, dir, "safetensors") / "model.pt") ==
          read_text(train_in(manifest(script("mlp.pt")), dir, "npy") / "model.pt"));
  }
}

TEST_CASE("torchvision's ResNet-18, scripted, trains on CIFAR-shaped tensors and resumes exactly",
          "[torchscript][slow]") {
  REQUIRE(fs::exists(fixtures() / "resnet18.pt"));  // tools/dev test installs python3-torchvision
  TempDir dir("torchscript-resnet");
  json m = manifest(script("resnet18.pt"));
  m["data"] = {{"train", {{"dataset", "tensors"}, {"path", (fixtures() / "cifar").string()}}}};
  m["eval"] = {{"interval", 0}, {"size", 0}};
  m["train"] = {{"max_steps", 6}, {"batch_size", 4}};
  m["checkpoint"] = {{"interval", 3}};
  const fs::path whole = train_in(m, dir, "whole");
  const auto saved = runtime::output::read_model_pt(whole / "model.pt");
  CHECK(saved.size() == 122);  // 62 parameters and 60 buffers, under torchvision's names
  const fs::path parts = dir / "parts" / "run";
  m["train"]["max_steps"] = 3;
  train_into(m, parts);
  resume_in(parts, {"train.max_steps=6"});
  require_same_run(whole, parts);
}

TEST_CASE("files that are not what a manifest says stop the run at start-up, naming the field and the file",
          "[torchscript]") {
  const auto error = [](const json& m) {
    TempDir dir("torchscript-errors");
    try {
      run_json(m, dir.path());
    } catch (const sdk::ConfigError& e) {
      return std::string(e.what());
    } catch (const sdk::DataError& e) {
      return std::string("data: ") + e.what();
    }
    return std::string("(no error)");
  };
  const std::string files = fixtures().string();
  CHECK_THAT(error(manifest(script("bad/model.pt"))),
             Catch::StartsWith("model.options.path: " + files + "/bad/model.pt: not a TorchScript file"));
  CHECK_THAT(error(manifest(script("too_new.pt"))),
             Catch::StartsWith("model.options.path: " + files +
                               "/too_new.pt: saved by a newer PyTorch than the "
                               "LibTorch") &&
                 Catch::Contains("reads TorchScript files of format versions up to"));
  CHECK_THAT(error(manifest(script("mlp.pt", {{"inputs", {"input", "target"}}}))),
             Catch::StartsWith("model.options.inputs: " + files + "/mlp.pt: forward(input) takes 1 arguments"));
  CHECK_THAT(error(manifest(script("pair.pt"))),
             Catch::StartsWith("model.options.loss: " + files + "/pair.pt: forward() returns Tuple[Tensor, Tensor]"));
  CHECK_THAT(error(manifest(script("empty.pt"))),
             Catch::StartsWith("model.options.path: " + files + "/empty.pt: the module has no parameters to train"));
  CHECK(error(manifest(script("missing.pt"))) == "model.options.path: " + files + "/missing.pt: no such file");
  for (const auto& [folder, message] : std::vector<std::pair<std::string, std::string>>{
           {"nan", "/bad/nan/input.npy: field \"input\" holds NaN or infinite values"},
           {"uint16", "/bad/uint16/target.npy: dtype '<u2' is not one ExoGym reads"},
           {"fortran", "/bad/fortran/input.npy: the array is in Fortran order"},
           {"lengths", "/bad/lengths/target.npy: field \"target\" has 10 examples, field \"input\""},
           {"notnpy", "/bad/notnpy/input.npy: not a .npy file"}}) {
    INFO(folder);
    json m = manifest(script("mlp.pt"));
    m["data"]["train"]["path"] = files + "/bad/" + folder;
    CHECK_THAT(error(m), Catch::StartsWith("data.train.path: " + files + message));
  }
}

}  // namespace exogym::test
