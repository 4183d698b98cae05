// The language-modelling datasets: text-char (character vocabularies,
// windows, splits), tokens (memory-mapped uint16 files) and the contiguous
// partition.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "exogym/runtime/data/char_vocabulary.h"
#include "exogym/runtime/data/contiguous_sampler.h"
#include "exogym/runtime/data/mapped_file.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/data/text_char.h"
#include "exogym/runtime/data/tokens.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "lm_fixtures.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::data::CharVocabulary;
using exogym::runtime::data::ContiguousSampler;
using exogym::runtime::data::TextCharDataset;
using exogym::runtime::data::TextCharOptions;
using exogym::runtime::data::TokensDataset;
using exogym::runtime::data::TokensOptions;
using exogym::sdk::ConfigError;
using exogym::test::error_of;
using exogym::test::read_text;
using exogym::test::shakespeare;
using exogym::test::TempDir;
using exogym::test::text_manifest;
using exogym::test::to_vector;
using exogym::test::write_text;
using nlohmann::json;

namespace {

void write_tokens(const fs::path& file, const std::vector<uint16_t>& tokens) {
  std::ofstream out(file, std::ios::binary);
  for (const uint16_t t : tokens) {
    const char bytes[2] = {static_cast<char>(t & 0xFF), static_cast<char>(t >> 8)};  // little-endian, as numpy
    out.write(bytes, 2);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// text-char

TEST_CASE("text-char: the reference vocabulary round-trips text", "[lm][data]") {
  const CharVocabulary v = CharVocabulary::reference();
  REQUIRE(v.size() == 66);
  CHECK(v.eos() == 65);
  CHECK(v.id(U' ') == 0);
  CHECK(v.id(U'?') == 11);
  CHECK(v.id(U'A') == 12);
  CHECK(v.id(U'a') == 38);
  CHECK(v.id(U'\n') == 64);
  CHECK_FALSE(v.id(U'#').has_value());
  const std::string text = "To be, or not to be: that is the question.\nWhither, O Romeo?! 3 $&'-;";
  const auto ids = v.encode(text, "t");
  CHECK(ids.size() == text.size());
  CHECK(v.decode(ids) == text);
  CHECK(v.token_text(65).empty());  // EOS decodes to nothing
  CHECK(v.decode({12, 65, 38}) == "Aa");
  CHECK_THROWS_AS(v.token_text(66), std::out_of_range);

  // Every character of the bundled Shakespeare is in it.
  const std::string all = read_text(shakespeare());
  CHECK(v.decode(v.encode(all, "input.txt")) == all);

  CHECK(error_of([&] { v.encode("ab\ncd#e", "my.txt"); }) ==
        "my.txt: character '#' (U+0023) at byte offset 5 (line 2, column 3) is not in the vocabulary (65 characters)");
}

TEST_CASE("text-char: a vocabulary derived from the file, UTF-8 included", "[lm][data]") {
  const std::string text = "héllo wörld\nßé\n";
  const CharVocabulary v = CharVocabulary::from_text(text, "f.txt");
  // Sorted by code point: \n, ' ', d, h, l, o, r, w, ß, é, ö; then EOS.
  CHECK(v.size() == 12);
  CHECK(v.characters() == std::u32string(U"\n dhlorwßéö"));
  CHECK(v.id(U'é') == 9);
  CHECK(v.decode(v.encode(text, "f.txt")) == text);
  CHECK(v.token_text(9) == "é");
  CHECK(v.token_text(11).empty());  // EOS
  CHECK(v.encode("ö", "p").size() == 1);

  CHECK_THAT(error_of([] { CharVocabulary::from_text(std::string("ab\xff"), "bad.txt"); }),
             Catch::StartsWith("bad.txt: invalid UTF-8 (byte 0xFF) at byte offset 2 (line 1, column 3)"));
  CHECK_THAT(error_of([&] { v.encode("hé!", "the prompt"); }),
             Catch::StartsWith("the prompt: character '!' (U+0021) at byte offset 3 (line 1, column 3)"));

  TempDir dir("lm-vocab");
  write_text(dir / "f.txt", text + text + text);
  TextCharOptions options;
  options.block_size = 4;
  options.vocabulary = "file";
  options.val_fraction = 0.5;
  const TextCharDataset ds(dir / "f.txt", "train", options);
  CHECK(ds.vocabulary().characters() == v.characters());
  CHECK(TextCharDataset::vocabulary_for(dir / "f.txt", "file").characters() == v.characters());
  CHECK(TextCharDataset::vocabulary_for(dir / "f.txt", "reference").size() == 66);
  // The reference vocabulary refuses the file, naming the character and where it is.
  options.vocabulary = "reference";
  CHECK(error_of([&] { TextCharDataset(dir / "f.txt", "train", options); }) ==
        (dir / "f.txt").string() +
            ": character 'é' (U+00E9) at byte offset 1 (line 1, column 2) is not in the vocabulary (65 "
            "characters); set the dataset option \"vocabulary\": \"file\" to use the file's own characters");
}

TEST_CASE("text-char: windows of block_size, input and target shifted by one, split by val_fraction", "[lm][data]") {
  TempDir dir("lm-text");
  std::string text;
  for (int i = 0; i < 10; ++i) text += "abcdefghij";  // 100 characters, + EOS = 101 tokens
  write_text(dir / "t.txt", text);
  TextCharOptions options;
  options.block_size = 8;
  options.val_fraction = 0.2;
  const TextCharDataset train(dir / "t.txt", "train", options);
  const TextCharDataset val(dir / "t.txt", "val", options);
  const TextCharDataset test(dir / "t.txt", "test", options);
  // floor(101 · 0.8) = 80 training tokens, 21 validation tokens.
  CHECK(train.tokens().numel() == 80);
  CHECK(val.tokens().numel() == 21);
  CHECK(val.tokens().equal(test.tokens()));
  CHECK(train.size() == 80 - 8);
  CHECK(val.size() == 21 - 8);
  CHECK(train.tokens_per_example() == 8);
  CHECK(to_vector(val.tokens()).back() == 65);  // EOS ends the text
  const CharVocabulary v = CharVocabulary::reference();
  CHECK(v.decode(to_vector(val.tokens())) == text.substr(80));

  const auto batch = train.get({0, 3, 71});
  REQUIRE(batch.at("input").sizes() == at::IntArrayRef({3, 8}));
  REQUIRE(batch.at("target").sizes() == at::IntArrayRef({3, 8}));
  CHECK(batch.at("input").scalar_type() == at::kLong);
  CHECK(v.decode(to_vector(batch.at("input")[0])) == "abcdefgh");
  CHECK(v.decode(to_vector(batch.at("target")[0])) == "bcdefghi");
  CHECK(v.decode(to_vector(batch.at("input")[1])) == "defghija");
  CHECK(v.decode(to_vector(batch.at("target")[2])) == text.substr(72, 8));
  CHECK_THROWS_AS(train.get({72}), exogym::sdk::InternalError);

  options.stride = 4;
  const TextCharDataset strided(dir / "t.txt", "train", options);
  CHECK(strided.size() == (80 - 8 - 1) / 4 + 1);
  CHECK(v.decode(to_vector(strided.get({2}).at("input")[0])) == "ijabcdef");

  // The bundled Shakespeare, as the reference splits it (90 % / 10 %).
  TextCharOptions reference;
  reference.block_size = 128;
  const TextCharDataset shakespeare_train(shakespeare(), "train", reference);
  CHECK(shakespeare_train.tokens().numel() == 1003855);  // floor(1,115,395 · 0.9)
  CHECK(shakespeare_train.size() == 1003855 - 128);
  CHECK(v.decode(to_vector(shakespeare_train.get({0}).at("input")[0])).rfind("First Citizen:\nBefore we proceed", 0) ==
        0);
}

TEST_CASE("text-char: errors name the file and the problem", "[lm][data]") {
  TempDir dir("lm-text-errors");
  TextCharOptions options;
  options.block_size = 8;
  CHECK(error_of([&] { TextCharDataset(dir / "missing.txt", "train", options); }) ==
        (dir / "missing.txt").string() + ": no such file");
  CHECK_THAT(error_of([&] { TextCharDataset(dir.path(), "train", options); }), Catch::Contains("is a folder"));
  write_text(dir / "short.txt", "abcdefghijklmnopqrst");  // 21 tokens: val gets 3
  CHECK(error_of([&] { TextCharDataset(dir / "short.txt", "val", options); }) ==
        (dir / "short.txt").string() +
            ": split \"val\" has 3 tokens (of 21, val_fraction 0.100000), fewer than block_size + 1 = 9; lower "
            "block_size or use a longer text");
  CHECK_THROWS_AS(TextCharDataset(dir / "short.txt", "validation", options), ConfigError);

  // Through a run: the error names the manifest field.
  json m = text_manifest(1, 2);
  m["data"]["val"]["path"] = (dir / "short.txt").string();
  m["data"]["val"]["options"]["block_size"] = 16;
  CHECK_THAT(error_of([&] { exogym::test::run_json(m, dir.path()); }),
             Catch::StartsWith("data.val.path: " + (dir / "short.txt").string() + ": split \"val\" has 3 tokens"));
  m = text_manifest(1, 2);
  m["data"]["val"]["split"] = "dev";
  CHECK_THAT(error_of([&] { exogym::test::run_json(m, dir.path()); }),
             Catch::StartsWith("data.val.split: text-char has the splits"));
}

// ---------------------------------------------------------------------------
// tokens

TEST_CASE("tokens: memory-maps a uint16 file and reads windows", "[lm][data]") {
  TempDir dir("lm-tokens");
  std::vector<uint16_t> train(1000), val(300);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((i * 37) % 50257);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>(65535 - i % 7 - 1000 * (i % 3));
  write_tokens(dir / "train.bin", train);
  write_tokens(dir / "val.bin", val);

  TokensOptions options;
  options.block_size = 16;
  const TokensDataset ds(dir.path(), "train", options);
  CHECK(ds.file() == dir / "train.bin");
  CHECK(ds.num_tokens() == 1000);
  CHECK(ds.size() == (1000 - 16 - 1) / 16 + 1);  // non-overlapping windows by default
  CHECK(ds.tokens_per_example() == 16);
  const auto batch = ds.get({0, 61, 2});
  REQUIRE(batch.at("input").sizes() == at::IntArrayRef({3, 16}));
  CHECK(batch.at("input").scalar_type() == at::kLong);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t start = std::vector<int64_t>{0, 61, 2}[b] * 16;
    for (int64_t t = 0; t < 16; ++t) {
      CHECK(batch.at("input")[b][t].item<int64_t>() == train[start + t]);
      CHECK(batch.at("target")[b][t].item<int64_t>() == train[start + t + 1]);
    }
  }
  CHECK_THROWS_AS(ds.get({62}), exogym::sdk::InternalError);

  options.stride = 1;  // every position, as nanoGPT's get_batch draws
  const TokensDataset every(dir / "train.bin", "ignored for a file", options);
  CHECK(every.size() == 1000 - 16);
  CHECK(every.get({983}).at("target")[0][15].item<int64_t>() == train[999]);

  // "test" reads val.bin when there is no test.bin; ids up to 65535 pass with the check off.
  options.vocab_size = std::nullopt;
  options.stride = std::nullopt;
  const TokensDataset test(dir.path(), "test", options);
  CHECK(test.file() == dir / "val.bin");
  CHECK(test.token(0) == 65535);
  CHECK(test.get({1}).at("input")[0][0].item<int64_t>() == val[16]);
  CHECK(test.get({1}).at("input")[0][1].item<int64_t>() == val[17]);

  // Through the registry, the runtime shares one object between all nodes.
  exogym::sdk::DatasetRequest request;
  request.path = dir.path();
  request.split = "train";
  const auto built = exogym::runtime::data::make_builtin_dataset(
      "tokens", {{"block_size", 16}, {"vocab_size", 50257}, {"stride", nullptr}}, request);
  REQUIRE(built != nullptr);
  CHECK(built->size() == ds.size());
  CHECK(built->tokens_per_example() == 16);
}

TEST_CASE("tokens: a corrupt, short or out-of-vocabulary file is a clear error naming it", "[lm][data]") {
  TempDir dir("lm-tokens-errors");
  TokensOptions options;
  options.block_size = 8;
  {
    std::ofstream odd(dir / "odd.bin", std::ios::binary);
    odd << "abcdefghijklmnopqrstu";  // 21 bytes
  }
  CHECK(error_of([&] { TokensDataset(dir / "odd.bin", "train", options); }) ==
        (dir / "odd.bin").string() + ": 21 bytes, an odd number: not a file of uint16 tokens (corrupt or truncated?)");
  write_tokens(dir / "short.bin", {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(error_of([&] { TokensDataset(dir / "short.bin", "train", options); }) ==
        (dir / "short.bin").string() +
            ": 8 tokens, fewer than block_size + 1 = 9 (one example needs its input and one more target)");
  write_tokens(dir / "empty.bin", {});
  CHECK_THAT(error_of([&] { TokensDataset(dir / "empty.bin", "train", options); }),
             Catch::Contains("0 tokens, fewer than block_size + 1"));
  CHECK(error_of([&] { TokensDataset(dir / "nothing.bin", "train", options); }) ==
        (dir / "nothing.bin").string() + ": no such file or folder");
  CHECK(error_of([&] { TokensDataset(dir.path(), "train", options); }) ==
        dir.path().string() +
            ": no train.bin for split \"train\" (the folder has empty.bin, odd.bin, short.bin); nanoGPT's prepare "
            "scripts write train.bin and val.bin");

  // Ids are checked lazily, as windows are read.
  std::vector<uint16_t> tokens(40, 7);
  tokens[21] = 50300;
  write_tokens(dir / "big.bin", tokens);
  const TokensDataset big(dir / "big.bin", "train", options);
  CHECK_NOTHROW(big.get({0, 1}));
  CHECK(error_of([&] { big.get({2}); }) ==
        (dir / "big.bin").string() +
            ": token id 50300 at token offset 21 is not below vocab_size 50257 (set the dataset option "
            "\"vocab_size\" to the tokenizer's vocabulary size)");
}

TEST_CASE("text-char and tokens refuse a FIFO or a device before opening it", "[lm][data]") {
  TempDir dir("lm-special");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);  // opening it would block
  TextCharOptions text_options;
  TokensOptions token_options;
  for (const fs::path& file : {dir / "fifo", fs::path("/dev/zero"), fs::path("/dev/urandom")}) {
    CHECK(error_of([&] { TextCharDataset(file, "train", text_options); }) == file.string() + ": not a regular file");
    CHECK(error_of([&] { TokensDataset(file, "train", token_options); }) == file.string() + ": not a regular file");
  }
}

TEST_CASE("a memory-mapped file truncated while it is read stops the process naming the file", "[lm][data]") {
  TempDir dir("lm-sigbus");
  const fs::path file = dir / "tokens.bin";
  std::ofstream(file, std::ios::binary) << std::string(1 << 16, 'x');
  const exogym::runtime::data::MappedFile mapped(file);
  REQUIRE(mapped.size() == 1 << 16);
  fs::resize_file(file, 0);  // the mapped pages have no file behind them any more
  const fs::path errors = dir / "stderr.txt";
  // The child only reads (async-signal-safe from here on); the SIGBUS of the
  // read is answered by the handler the mapping installed.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int fd = ::open(errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    volatile unsigned char byte = mapped.data()[mapped.size() - 1];
    (void)byte;
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(read_text(errors) == "exogym-run: " + file.string() +
                                 ": the memory-mapped file was truncated or became unreadable while the run read it "
                                 "(SIGBUS); the run stopped\n");
}

// ---------------------------------------------------------------------------
// contiguous partition

TEST_CASE("contiguous partition: node r stays inside its slice rN/K to (r+1)N/K and together the nodes cover the range",
          "[lm][data]") {
  SECTION("even slices: every epoch covers the whole range") {
    const ContiguousSampler sampler(100, 4, 5, 42);
    CHECK(sampler.steps_per_epoch() == 5);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      std::vector<std::vector<int64_t>> orders(4);
      for (int r = 0; r < 4; ++r) {
        for (int64_t step = epoch * 5; step < (epoch + 1) * 5; ++step) {
          for (const int64_t i : sampler.batch_indices(r, step)) {
            CHECK(i >= 25 * r);
            CHECK(i < 25 * (r + 1));
            seen.push_back(i);
            orders[r].push_back(i - 25 * r);
          }
        }
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(100);
      for (int64_t i = 0; i < 100; ++i) all[i] = i;
      CHECK(seen == all);
      // The epoch's order is the IID sampler's permutation of the slice (seed + epoch).
      CHECK(orders[1] == exogym::runtime::data::IidSampler::permutation(25, 42, epoch));
    }
    CHECK(sampler.batch_indices(2, 0) != sampler.batch_indices(2, 5));  // reshuffled each epoch
  }
  SECTION("uneven slices: inside their slice, and every index is reached over the epochs") {
    const ContiguousSampler sampler(103, 4, 4, 7);
    CHECK(sampler.slice(0) == std::make_pair<int64_t, int64_t>(0, 25));
    CHECK(sampler.slice(1) == std::make_pair<int64_t, int64_t>(25, 51));
    CHECK(sampler.slice(3) == std::make_pair<int64_t, int64_t>(77, 103));
    CHECK(sampler.steps_per_epoch() == 6);  // the smallest slice, 25, holds 6 batches of 4
    std::set<int64_t> seen;
    for (int r = 0; r < 4; ++r) {
      const auto [begin, end] = sampler.slice(r);
      for (int64_t step = 0; step < 200; ++step) {
        for (const int64_t i : sampler.batch_indices(r, step)) {
          REQUIRE(i >= begin);
          REQUIRE(i < end);
          seen.insert(i);
        }
      }
    }
    CHECK(seen.size() == 103);
  }
  SECTION("factory and errors") {
    exogym::runtime::data::PartitionSpec iid, contiguous;
    contiguous.kind = exogym::runtime::data::PartitionSpec::Kind::Contiguous;
    CHECK(
        dynamic_cast<ContiguousSampler*>(exogym::runtime::data::make_sampler(contiguous, 100, nullptr, 4, 5, 1).get()));
    CHECK(dynamic_cast<exogym::runtime::data::IidSampler*>(
        exogym::runtime::data::make_sampler(iid, 100, nullptr, 4, 5, 1).get()));
    CHECK(error_of([] { ContiguousSampler(100, 4, 26, 0); }) ==
          "train.batch_size: with \"partition\": \"contiguous\" each node owns 25 or more of the 100 training "
          "examples, fewer than batch_size = 26");
  }
}
