// Files written once (runtime/util/atomic_file.h), the safetensors format
// (runtime/output/safetensors.h) and model.pt (runtime/output/model_pt.h;
// model_files_python.sh loads both with the real PyTorch).
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/output/model_pt.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::output::read_model_pt;
using exogym::runtime::output::read_safetensors;
using exogym::runtime::output::safetensors_bytes;
using exogym::runtime::output::write_safetensors;
using exogym::runtime::util::write_file_atomically;

namespace {

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int entries(const fs::path& folder) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folder)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a file written atomically replaces the old one and leaves nothing else", "[output]") {
  exogym::test::TempDir dir("output-files");
  const fs::path file = dir.path() / "summary.json";
  write_file_atomically(file, "first");
  write_file_atomically(file, std::string("second\0with a zero", 18));
  CHECK(read_all(file) == std::string("second\0with a zero", 18));
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("a failed atomic write names the file, keeps the old one and removes its temporary file", "[output]") {
  exogym::test::TempDir dir("output-files");
  // A folder where the file should be: the rename fails after the data was written.
  const fs::path blocked = dir.path() / "model.pt";
  fs::create_directory(blocked);
  fs::path in_it = blocked / "old";
  std::ofstream(in_it) << "old";
  CHECK_THROWS_WITH(write_file_atomically(blocked, "new"), Catch::StartsWith(blocked.string() + ": cannot replace it"));
  CHECK(entries(dir.path()) == 1);
  CHECK(read_all(in_it) == "old");
  const fs::path missing = dir.path() / "no-such-folder" / "config.json";
  CHECK_THROWS_AS(write_file_atomically(missing, "x"), exogym::sdk::Error);
  CHECK_THROWS_WITH(write_file_atomically(missing, "x"), Catch::Contains(missing.string()));
}

TEST_CASE("safetensors files round-trip every dtype, with the header aligned and metadata kept", "[output]") {
  exogym::test::TempDir dir("output-files");
  const fs::path file = dir.path() / "model.safetensors";
  exogym::runtime::output::NamedTensors tensors{
      {"w", at::arange(6, at::kFloat).reshape({2, 3}).div(7)},
      {"b", at::arange(3, at::kDouble)},
      {"steps", at::tensor({int64_t{5}, int64_t{-3}})},
      {"half", at::arange(4, at::kFloat).to(at::kBFloat16)},
      {"mask", at::arange(2, at::kLong).eq(0)},  // [true, false]
      {"scalar", at::tensor(2.5f).reshape({})},
  };
  write_safetensors(file, tensors, {{"format", "pt"}, {"step", "100"}});
  const std::string bytes = read_all(file);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  CHECK(header % 8 == 0);
  const auto header_json = nlohmann::json::parse(bytes.substr(8, header));
  CHECK(header_json["w"]["dtype"] == "F32");
  CHECK(header_json["w"]["shape"] == nlohmann::json({2, 3}));
  CHECK(header_json["w"]["data_offsets"] == nlohmann::json({0, 24}));
  CHECK(header_json["half"]["dtype"] == "BF16");
  CHECK(header_json["scalar"]["shape"] == nlohmann::json::array());
  CHECK(header_json["__metadata__"]["step"] == "100");
  CHECK(bytes.size() == 8 + header + 24 + 24 + 16 + 8 + 2 + 4);

  const auto back = read_safetensors(file);
  REQUIRE(back.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CHECK(back.tensors[i].first == tensors[i].first);
    CHECK(back.tensors[i].second.scalar_type() == tensors[i].second.scalar_type());
    CHECK(at::equal(back.tensors[i].second, tensors[i].second));
  }
  CHECK(back.metadata.at("format") == "pt");
}

TEST_CASE("a damaged safetensors file is a data error naming the file", "[output]") {
  exogym::test::TempDir dir("output-files");
  const fs::path file = dir.path() / "model.safetensors";
  const std::string bytes = safetensors_bytes({{"w", at::arange(16, at::kFloat)}});
  std::ofstream(file, std::ios::binary) << bytes.substr(0, bytes.size() - 4);  // truncated
  CHECK_THROWS_AS(read_safetensors(file), exogym::sdk::DataError);
  CHECK_THROWS_WITH(read_safetensors(file), Catch::Contains(file.string()) && Catch::Contains("\"w\""));
  std::ofstream(file, std::ios::binary) << std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
  CHECK_THROWS_WITH(read_safetensors(file), Catch::Contains("header length exceeds"));
}

TEST_CASE("model.pt round-trips every dtype bit for bit, in order, as a plain dict", "[output]") {
  exogym::test::TempDir dir("output-files");
  const fs::path file = dir.path() / "model.pt";
  const at::Tensor wide = at::arange(12, at::kFloat).reshape({3, 4}).div(7);
  exogym::runtime::output::NamedTensors tensors{
      {"w", wide.t()},  // not contiguous: stored as its values, contiguous
      {"b", at::arange(3, at::kDouble).sub(1.0 / 3)},
      {"steps", at::tensor({int64_t{5}, int64_t{-3}, int64_t{1} << 40})},
      {"counts", at::tensor({7, -8}, at::kInt)},
      {"half", at::arange(4, at::kFloat).div(3).to(at::kHalf)},
      {"bf16", at::arange(4, at::kFloat).div(3).to(at::kBFloat16)},
      {"mask", at::arange(2, at::kLong).eq(0)},  // [true, false]
      {"bytes", at::tensor({0, 200, 255}, at::kByte)},
      {"scalar", at::tensor(2.5f).reshape({})},
      {"empty", at::arange(0, at::kFloat).reshape({0, 5})},
  };
  exogym::runtime::output::write_model_pt(file, tensors);
  const auto back = read_model_pt(file);
  REQUIRE(back.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    CHECK(back[i].first == tensors[i].first);
    CHECK(back[i].second.scalar_type() == tensors[i].second.scalar_type());
    CHECK(back[i].second.sizes() == tensors[i].second.sizes());
    CHECK(at::equal(back[i].second, tensors[i].second));
  }
  // The pickle names nothing but what torch.load(weights_only=True) allows.
  const std::string bytes = read_all(file);
  CHECK(bytes.find("restore_type_tag") == std::string::npos);
  CHECK(bytes.find("torch._utils\n_rebuild_tensor_v2\n") != std::string::npos);
}

TEST_CASE("a model.pt that is not a dict of tensors is a data error naming the file", "[output]") {
  exogym::test::TempDir dir("output-files");
  const fs::path file = dir.path() / "model.pt";
  std::ofstream(file, std::ios::binary) << "not a zip archive";
  CHECK_THROWS_AS(read_model_pt(file), exogym::sdk::DataError);
  CHECK_THROWS_WITH(read_model_pt(file), Catch::StartsWith(file.string() + ": not a {name: tensor} dict"));
  CHECK_THROWS_WITH(read_model_pt(dir.path() / "none.pt"), Catch::StartsWith((dir.path() / "none.pt").string()));
  CHECK_THROWS_WITH(exogym::runtime::output::model_pt_bytes({{"z", at::ones({2}, at::kComplexFloat)}}),
                    Catch::Contains("\"z\"") && Catch::Contains("cannot store"));
}
