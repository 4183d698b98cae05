// Language modelling end to end: token accounting in a run, nanoGPT learning
// Shakespeare, and text generation from a trained run (the library and the
// exogym-generate tool).
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "exogym/runtime/command/text_generator.h"
#include "exogym/runtime/data/char_vocabulary.h"
#include "helpers.h"
#include "lm_fixtures.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::data::CharVocabulary;
using exogym::test::error_of;
using exogym::test::read_text;
using exogym::test::TempDir;
using exogym::test::text_manifest;
using exogym::test::write_text;
using nlohmann::json;

// ---------------------------------------------------------------------------
// token accounting and learning

TEST_CASE("a text-char run with the contiguous partition reports tokens trained and tokens per second",
          "[lm][training]") {
  TempDir dir("lm-run");
  json m = text_manifest(2, 6);
  m["data"]["train"]["partition"] = "contiguous";
  const auto result = exogym::test::run_json(m, dir.path());
  REQUIRE(result.final_eval.has_value());
  const json summary = json::parse(read_text(dir / "run" / "summary.json"));
  CHECK(summary["examples_trained"] == 6 * 8 * 2);
  CHECK(summary["tokens_trained"] == 6 * 8 * 2 * 16);
  CHECK(summary["tokens_per_second"].get<double>() > 0);
  CHECK(summary["tokens_per_second"].get<double>() ==
        Approx(6 * 8 * 2 * 16 / summary["wall_seconds"].get<double>()).epsilon(1e-9));
  const json config = json::parse(read_text(dir / "run" / "config.json"));
  CHECK(config["data"]["train"]["partition"] == "contiguous");
  CHECK(config["data"]["train"]["options"]["vocabulary"] == "reference");
  CHECK(fs::path(config["data"]["train"]["path"].get<std::string>()).is_absolute());
  // Validation loss and perplexity of a character model.
  const double loss = summary["final"]["global_loss"].get<double>();
  CHECK(loss < std::log(66.0));
  CHECK(summary["final"]["global_perplexity"].get<double>() == Approx(std::exp(loss)));

  // Not a token dataset: no token counts.
  TempDir other("lm-run-synthetic");
  exogym::test::run_json(exogym::test::small_manifest(1), other.path());
  CHECK_FALSE(json::parse(read_text(other / "run" / "summary.json")).contains("tokens_trained"));
}

TEST_CASE("4-node DiLoCo on Shakespeare brings the character-level validation loss below 2.5 in 300 steps",
          "[lm][slow]") {
  // About 20 s on 2 cores; it ends at 2.39. For scale: guessing uniformly
  // scores ln 66 = 4.19, the character frequencies 3.31, and the exact
  // previous-character statistics of the text 2.45.
  TempDir dir("lm-diloco");
  json m = text_manifest(4, 300);
  m["model"]["options"] = {{"n_layer", 2}, {"n_head", 4}, {"n_embd", 64}, {"block_size", 32}};
  m["data"]["train"]["options"]["block_size"] = 32;
  m["data"]["val"]["options"]["block_size"] = 32;
  m["strategy"] = {{"plugin", "diloco"},
                   {"options",
                    {{"H", 20},
                     {"optimizer", {{"name", "adamw"}, {"lr", 3e-3}}},
                     {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 15}}},
                     {"max_norm", 1.0}}}};
  m["train"]["batch_size"] = 16;
  m["eval"] = {{"interval", 100}, {"size", 512}};
  const auto result = exogym::test::run_json(m, dir.path());
  REQUIRE(result.final_eval.has_value());
  INFO("validation loss " << result.final_eval->global.loss);
  CHECK(result.final_eval->global.loss < 2.5);
  CHECK(result.final_eval->local.loss == result.final_eval->global.loss);  // step 300 is a sync step
}

// ---------------------------------------------------------------------------
// generation

namespace {

// Trains a tiny character model for a few steps into dir/run.
fs::path tiny_text_run(const fs::path& dir, const std::string& vocabulary = "reference") {
  json m = text_manifest(2, 30);
  m["data"]["train"]["options"]["vocabulary"] = vocabulary;
  m["data"]["val"]["options"]["vocabulary"] = vocabulary;
  if (vocabulary == "file") m["model"]["options"]["vocab_size"] = 66;  // 65 distinct characters + EOS
  exogym::test::run_json(m, dir);
  // train_run leaves this thread with one OpenMP thread per core, which on
  // a loaded machine makes the many small forward passes of sampling spin.
  at::set_num_threads(1);
  return dir / "run";
}

}  // namespace

TEST_CASE("generation: vocabulary characters only, the same text for the same seed, context cropped",
          "[lm][generate]") {
  TempDir dir("lm-generate");
  const fs::path run = tiny_text_run(dir.path());
  exogym::runtime::command::TextGenerator generator(run, exogym::test::test_loader());
  const CharVocabulary& v = generator.vocabulary();
  CHECK(v.size() == 66);

  exogym::runtime::command::SampleOptions options;
  options.max_tokens = 60;  // longer than the model's block_size 16: the context is cropped
  options.seed = 7;
  options.stop_at_eos = false;
  std::string streamed;
  const std::string a = generator.generate("ROMEO:", options, [&](const std::string& text) { streamed += text; });
  CHECK(a.size() == 60);
  CHECK(streamed == a);
  for (const char c : a) CHECK(v.id(static_cast<unsigned char>(c)).has_value());
  CHECK(generator.generate("ROMEO:", options) == a);
  options.seed = 8;
  CHECK(generator.generate("ROMEO:", options) != a);

  // top-k 1 and temperature 0 both pick the most likely character.
  options.top_k = 1;
  const std::string greedy = generator.generate("ROMEO:", options);
  options.temperature = 0;
  options.seed = 99;
  CHECK(generator.generate("ROMEO:", options) == greedy);

  CHECK_THAT(error_of([&] { generator.generate("Zoë", options); }),
             Catch::StartsWith("the prompt: character 'ë' (U+00EB) at byte offset 2 (line 1, column 3) is not in "
                               "the vocabulary"));
  options.max_tokens = 5;
  CHECK(generator.generate("", options).size() == 5);  // an empty prompt starts from EOS

  // A file-derived vocabulary is rebuilt from the text file named in config.json.
  TempDir file_dir("lm-generate-file");
  exogym::runtime::command::TextGenerator from_file(tiny_text_run(file_dir.path(), "file"),
                                                    exogym::test::test_loader());
  CHECK(from_file.vocabulary().id(U'\n') == 0);
  CHECK(from_file.generate("ROMEO:", options).size() == 5);
}

TEST_CASE("generation: clear errors for a missing run, a folder of variants, a non-text run", "[lm][generate]") {
  TempDir dir("lm-generate-errors");
  auto& loader = exogym::test::test_loader();
  CHECK(error_of([&] { exogym::runtime::command::TextGenerator(dir / "nope", loader); }) ==
        (dir / "nope").string() + ": no such run folder");
  fs::create_directories(dir / "variants" / "ddp");
  write_text(dir / "variants" / "ddp" / "config.json", "{}");
  CHECK(error_of([&] { exogym::runtime::command::TextGenerator(dir / "variants", loader); }) ==
        (dir / "variants").string() +
            ": a folder of variants, not a run folder; pick one of: " + (dir / "variants" / "ddp").string());

  exogym::test::run_json(exogym::test::small_manifest(1), dir.path());
  CHECK(error_of([&] { exogym::runtime::command::TextGenerator(dir / "run", loader); }) ==
        (dir / "run").string() +
            ": trained on dataset \"synthetic\", which has no character vocabulary; exogym-generate samples from "
            "runs on text-char data");

  TempDir text("lm-generate-nomodel");
  const fs::path run = tiny_text_run(text.path());
  fs::remove(run / "model.pt");
  CHECK_THAT(error_of([&] { exogym::runtime::command::TextGenerator(run, loader); }),
             Catch::StartsWith((run / "model.pt").string() + ": no such file"));
}

TEST_CASE("exogym-generate streams a continuation of the prompt, the same seed gives the same text",
          "[lm][generate][cli]") {
  TempDir dir("lm-generate-cli");
  const fs::path run = tiny_text_run(dir.path());
  const auto cli = [&](const std::string& args, const std::string& log) {
    const std::string command =
        std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-generate " + args + " > " + (dir / log).string() + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string common = run.string() + " --prompt 'JULIET:' --tokens 80 --temperature 0.9 --top-k 20";
  REQUIRE(cli(common + " --seed 3", "a.txt") == 0);
  REQUIRE(cli(common + " --seed 3", "b.txt") == 0);
  REQUIRE(cli(common + " --seed 4", "c.txt") == 0);
  const std::string a = read_text(dir / "a.txt");
  INFO(a);
  CHECK(a.rfind("JULIET:", 0) == 0);
  CHECK(a.back() == '\n');
  CHECK(a.size() <= 7 + 80 + 1);
  CHECK(a == read_text(dir / "b.txt"));
  CHECK(a != read_text(dir / "c.txt"));
  const CharVocabulary v = CharVocabulary::reference();
  for (const char c : a) CHECK(v.id(static_cast<unsigned char>(c)).has_value());
  // The library, with the same options, produces the same text.
  exogym::runtime::command::TextGenerator generator(run, exogym::test::test_loader());
  exogym::runtime::command::SampleOptions options;
  options.max_tokens = 80, options.temperature = 0.9, options.top_k = 20, options.seed = 3;
  CHECK(a == "JULIET:" + generator.generate("JULIET:", options) + "\n");

  CHECK(cli(run.string() + " --prompt 'Zoë'", "bad-prompt.txt") == 2);
  CHECK_THAT(read_text(dir / "bad-prompt.txt"),
             Catch::Contains("exogym-generate: the prompt: character 'ë' (U+00EB)") &&
                 Catch::Contains("not in the vocabulary"));
  CHECK(cli((dir / "nope").string(), "missing.txt") == 2);  // input error
  CHECK(read_text(dir / "missing.txt") == "exogym-generate: " + (dir / "nope").string() + ": no such run folder\n");
  CHECK(cli(run.string() + " --top-k -1", "usage.txt") == 2);
  CHECK(cli("--help", "help.txt") == 0);
  CHECK_THAT(read_text(dir / "help.txt"), Catch::Contains("Usage: exogym-generate") && Catch::Contains("--top-k"));
}

TEST_CASE("exogym-generate: a damaged, empty or endless model.pt and a huge --tokens are one-line errors, exit 2",
          "[lm][generate][cli]") {
  TempDir dir("lm-generate-bad-model");
  const fs::path run = tiny_text_run(dir.path());
  const std::string model = read_text(run / "model.pt");
  const auto cli = [&](const std::string& args) {
    const std::string command = "timeout 60 " + std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-generate " + args +
                                " > " + (dir / "out.txt").string() + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const fs::path file = run / "model.pt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"damaged", "not a {name: tensor} dict saved by exogym-run or torch.save: "},
      {"empty", "not a {name: tensor} dict saved by exogym-run or torch.save: the file is empty"},
      {"/dev/zero", "a device, not a regular file"},
  };
  for (const auto& [what, words] : cases) {
    INFO(what);
    fs::remove(file);
    if (what == "damaged") write_text(file, model.substr(0, 40) + std::string(200, '\x7f') + model.substr(240));
    if (what == "empty") write_text(file, "");
    if (what == "/dev/zero") fs::create_symlink("/dev/zero", file);
    CHECK(cli(run.string() + " --tokens 5") == 2);
    const std::string out = read_text(dir / "out.txt");
    INFO(out);
    CHECK(out.rfind("exogym-generate: " + file.string() + ": " + words, 0) == 0);
    // One line: no LibTorch stack trace after it.
    CHECK(out.find('\n') == out.size() - 1);
  }
  fs::remove(file);
  write_text(file, model);
  CHECK(cli(run.string() + " --tokens 99999999999999999999") == 2);
  CHECK_THAT(read_text(dir / "out.txt"), Catch::Contains("--tokens"));
}
