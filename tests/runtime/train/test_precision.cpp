// Mixed precision ("precision": "bf16"): forward passes under autocast, with
// fp32 weights, optimizer state and communication (docs/performance.md).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;
using runtime::manifest::Precision;
using runtime::train::autocast_enabled;
using runtime::train::AutocastScope;

TEST_CASE("an autocast scope makes matrix products bf16 on its thread and restores the state it found", "[precision]") {
  const at::Tensor a = at::rand({8, 8}), b = at::rand({8, 8});
  {
    AutocastScope fp32(Precision::Fp32, c10::DeviceType::CPU);
    CHECK(at::mm(a, b).scalar_type() == at::kFloat);
    CHECK_FALSE(autocast_enabled(c10::DeviceType::CPU));
  }
  {
    AutocastScope outer(Precision::Bf16, c10::DeviceType::CPU);
    CHECK(at::mm(a, b).scalar_type() == at::kBFloat16);
    {
      AutocastScope inner(Precision::Bf16, c10::DeviceType::CPU);
      CHECK(at::mm(a, b).scalar_type() == at::kBFloat16);
    }
    CHECK(autocast_enabled(c10::DeviceType::CPU));  // the inner scope put back what it found
    CHECK(at::mm(a, b).scalar_type() == at::kBFloat16);
  }
  CHECK_FALSE(autocast_enabled(c10::DeviceType::CPU));
  CHECK(at::mm(a, b).scalar_type() == at::kFloat);
  CHECK(a.scalar_type() == at::kFloat);
}

TEST_CASE("precision bf16 trains with fp32 weights, sends the same bytes, and reproduces bit for bit", "[precision]") {
  TempDir dir("precision");
  json m = small_manifest(2);
  m["train"]["max_steps"] = 30;
  std::map<std::string, runtime::train::TrainingResult> results;
  std::map<std::string, std::map<std::string, at::Tensor>> models;
  for (const std::string run : {"fp32", "bf16", "bf16-again"}) {
    m["precision"] = run == "fp32" ? "fp32" : "bf16";
    fs::create_directories(dir / run);
    results[run] = run_json(m, dir / run);
    models[run] = load_model_pt(dir / run / "run" / "model.pt");
    CHECK(json::parse(read_text(dir / run / "run" / "config.json")).at("precision") == m["precision"]);
  }
  for (const auto& [name, tensor] : models["bf16"]) {
    INFO(name);
    CHECK(tensor.scalar_type() == at::kFloat);
  }
  CHECK(bit_identical(models["bf16"], models["bf16-again"]));
  // bf16 products round differently: a different model, but one that learnt.
  CHECK_FALSE(bit_identical(models["fp32"], models["bf16"]));
  CHECK(max_abs_diff(models["fp32"], models["bf16"]) < 0.05);
  const double fp32_loss = results["fp32"].final_eval->global.loss, bf16_loss = results["bf16"].final_eval->global.loss;
  CHECK(bf16_loss != fp32_loss);
  CHECK(std::abs(bf16_loss - fp32_loss) < 0.05 * fp32_loss);
  // Communication stays fp32: the same bytes.
  CHECK(results["bf16"].simulated.bytes_sent_total == results["fp32"].simulated.bytes_sent_total);
  CHECK(results["bf16"].simulated.bytes_sent_total > 0);
}

TEST_CASE("precision accepts fp32 and bf16 only, naming the field", "[precision]") {
  json m = small_manifest(2);
  m["precision"] = "fp16";
  REQUIRE_THROWS_WITH(runtime::manifest::parse_manifest(m, ".", "test"),
                      Catch::Contains("precision") && Catch::Contains("bf16"));
  m.erase("precision");
  CHECK(runtime::manifest::parse_manifest(m, ".", "test").runs.at(0).precision == Precision::Fp32);
}

}  // namespace exogym::test
