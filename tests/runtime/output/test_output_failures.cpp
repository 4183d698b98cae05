// The run folder under pressure: runs started together with the same name,
// and a file system that fills up while a run writes (runtime/output/
// run_folder.h, csv_file.h).
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/output/csv_file.h"
#include "exogym/runtime/output/run_folder.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::output::create_run_folder;
using exogym::runtime::output::CsvFile;
using exogym::runtime::output::RunWriter;
using exogym::test::read_text;
using exogym::test::TempDir;

namespace {

// A 64 KiB tmpfs: a disk that fills up. Mounting needs root, and CI runs as
// root: there a refused mount fails the test instead of skipping it.
class TinyFilesystem {
 public:
  TinyFilesystem() : dir_("tiny-fs") {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, "size=64k") == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~TinyFilesystem() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  // Whether the test can go on; fails it as root, warns otherwise.
  bool usable() const {
    if (mounted_) return true;
    if (::geteuid() == 0) FAIL("cannot mount a tmpfs as root: " << error_);
    WARN("skipped: mounting a tmpfs needs root (" << error_ << ")");
    return false;
  }
  const fs::path& path() const { return dir_.path(); }
  // Fills the file system up to `left` bytes of free space.
  void fill_leaving(uint64_t left) const {
    struct statvfs info {};
    REQUIRE(::statvfs(path().c_str(), &info) == 0);
    const uint64_t free_bytes = static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
    REQUIRE(free_bytes > left);
    std::ofstream(path() / "filler", std::ios::binary) << std::string(free_bytes - left, 'x');
  }

 private:
  TempDir dir_;
  bool mounted_ = false;
  std::string error_;
};

std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("runs started together with the same name each get a folder of their own", "[output]") {
  TempDir dir("run-folders");
  constexpr int kRuns = 8;
  for (int round = 0; round < 10; ++round) {
    const fs::path base = dir / ("round" + std::to_string(round)) / "mnist";
    std::vector<fs::path> claimed(kRuns);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kRuns; ++i) {
      threads.emplace_back([&, i] {
        // Start together, so that every run finds the name free.
        ready.fetch_add(1);
        while (ready.load() < kRuns) std::this_thread::yield();
        claimed[i] = create_run_folder(base);
      });
    }
    for (auto& t : threads) t.join();
    std::set<fs::path> distinct(claimed.begin(), claimed.end());
    CHECK(distinct.size() == kRuns);
    CHECK(distinct.count(base) == 1);
    CHECK(distinct.count(base.string() + "-" + std::to_string(kRuns)) == 1);
    for (const auto& folder : claimed) CHECK(fs::is_directory(folder));
  }
}

TEST_CASE("a run folder that cannot be created is an error naming it", "[output]") {
  TempDir dir("run-folders");
  std::ofstream(dir / "file") << "x";
  const fs::path below_a_file = dir / "file" / "run";
  CHECK_THROWS_WITH(create_run_folder(below_a_file), Catch::Contains((dir / "file").string()));
}

TEST_CASE("a full disk stops a CSV at its first failed write, naming the file and keeping whole rows", "[output]") {
  TinyFilesystem tiny;
  if (!tiny.usable()) return;
  const fs::path file = tiny.path() / "train.csv";
  CsvFile csv(file, "step,loss");
  int rows = 0;
  std::string failure;
  try {
    for (; rows < 100000; ++rows) {
      csv.append(std::to_string(rows) + ",0.123456789\n");
      csv.flush();
    }
  } catch (const exogym::sdk::Error& e) {
    failure = e.what();
  }
  CHECK(rows < 10000);  // 64 KiB hold about 4,000 such rows
  CHECK(failure == file.string() + ": write failed: " + std::strerror(ENOSPC));
  const std::string text = read_text(file);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  CHECK(std::count(text.begin(), text.end(), '\n') == rows + 1);
  // A later flush reports the same failure, it does not write half a row.
  CHECK_THROWS_WITH(csv.flush(), failure);
}

TEST_CASE("a run whose output disk fills up stops with an error naming the file and leaves no temporary file",
          "[output]") {
  TinyFilesystem tiny;
  if (!tiny.usable()) return;
  // Room for the folder's files and a few hundred rows of train.csv.
  tiny.fill_leaving(7 * 4096);
  auto manifest = exogym::test::small_manifest(2);
  manifest["train"]["max_steps"] = 5000;
  manifest["eval"]["interval"] = 1000;
  std::string failure;
  try {
    exogym::test::run_json(manifest, tiny.path());
  } catch (const exogym::sdk::Error& e) {
    failure = e.what();
  }
  INFO(failure);
  CHECK_THAT(failure, Catch::Contains(".csv: write failed: ") && Catch::Contains(std::strerror(ENOSPC)));
  const auto names = names_in(tiny.path() / "run");
  CHECK(std::find(names.begin(), names.end(), "summary.json") == names.end());
  CHECK(std::find(names.begin(), names.end(), "model.pt") == names.end());
  for (const auto& name : names) CHECK(name.find(".tmp") == std::string::npos);
  const std::string train = read_text(tiny.path() / "run" / "train.csv");
  CHECK(train.back() == '\n');
}
