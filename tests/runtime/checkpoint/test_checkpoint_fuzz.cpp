// A seeded mutation fuzzer over a real checkpoint folder, as the manifest
// fuzzer is over manifests: bytes of a node file or an index flipped
// (headers and metadata included), files cut short or emptied, a CSV cut
// short (its rows are not the checkpoint's; only its length is read back).
// Each mutant must resume to the run that never stopped (falling back to an
// older checkpoint as needed) or stop with a DataError or ConfigError
// (exit status 2) naming a file of the run folder; never end with a
// different result, never throw anything else. Seeded, so a failure
// repeats; bounded, so it runs in every ctest.
#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMutants = 36;

// The files a resume reads back: every checkpoint's, and the CSVs it cuts.
std::vector<fs::path> targets(const fs::path& run) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(run / "checkpoints"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  files.push_back(run / "train.csv");
  return files;
}

// Mutates one of `files`; returns what it did, for the failure message.
std::string mutate_files(const std::vector<fs::path>& files, std::mt19937_64& rng) {
  const fs::path& file = files[rng() % files.size()];
  std::string bytes = read_text(file);
  // A CSV's rows are the user's, not the checkpoint's: only where it ends
  // is read back, so a CSV is only cut.
  const int kind = file.extension() == ".csv" ? 2 : static_cast<int>(rng() % 4);
  std::string what;
  if (kind <= 1 && !bytes.empty()) {
    // Flip a byte; half the time within the first 512 (a header, index.json).
    const size_t span = kind == 0 ? std::min<size_t>(bytes.size(), 512) : bytes.size();
    const size_t at = rng() % span;
    bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + rng() % 255));
    what = "byte " + std::to_string(at) + " flipped";
  } else if (kind == 2) {
    bytes.resize(bytes.empty() ? 0 : rng() % bytes.size());
    what = "cut to " + std::to_string(bytes.size()) + " bytes";
  } else {
    bytes.clear();
    what = "emptied";
  }
  write_bytes(file, bytes);
  return file.string() + ": " + what;
}

}  // namespace

TEST_CASE("fuzz: every mutant of a checkpoint folder resumes exactly or stops naming a file", "[checkpoint][fuzz]") {
  TempDir dir("checkpoint-fuzz");
  json m = checkpointed_manifest(2, 5);
  m["train"]["max_steps"] = 20;
  m["checkpoint"]["keep"] = 3;
  train_into(m, dir / "whole");
  train_into(m, dir / "pristine");
  std::mt19937_64 rng(20261126);
  int resumed = 0, refused = 0;
  for (int i = 0; i < kMutants; ++i) {
    const fs::path run = dir / "run";
    fs::remove_all(run);
    fs::copy(dir / "pristine", run, fs::copy_options::recursive);
    fs::remove(run / "summary.json");  // as if stopped after its last checkpoint
    const std::string what = mutate_files(targets(run), rng);
    INFO("mutant " << i << ": " << what);
    try {
      resume_in(run);
      require_same_run(dir / "whole", run);
      ++resumed;
    } catch (const sdk::DataError& e) {
      CHECK(std::string(e.what()).find(run.string()) != std::string::npos);
      ++refused;
    } catch (const sdk::ConfigError& e) {
      CHECK(std::string(e.what()).find(run.string()) != std::string::npos);
      ++refused;
    }
  }
  // Most mutants hit something a resume reads and fall back; some leave
  // nothing to resume from (a CSV cut before every checkpoint).
  CHECK(resumed > kMutants / 2);
  CHECK(resumed + refused == kMutants);
}

}  // namespace exogym::test
