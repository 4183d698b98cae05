// Sizes checked before they are allocated: the nodes' memory estimate
// against the host's available memory, allocation failures named by field,
// and the caps on `threads` and `parallelism` (runtime/train/memory_check.h,
// runtime/host/host_memory.h).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "exogym/runtime/host/host_memory.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/memory_check.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::host::available_memory;
using exogym::runtime::train::check_memory;
using exogym::runtime::train::MemoryBudget;
using exogym::runtime::train::ReplicaBytes;
using exogym::sdk::ConfigError;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// The ConfigError `run_json(m)` throws (fails the test if none).
ConfigError limits_error(const nlohmann::json& m, const TempDir& dir) {
  try {
    run_json(m, dir.path());
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("the run was not refused");
  return ConfigError("", "");
}

exogym::runtime::manifest::Manifest manifest_of(const nlohmann::json& m) {
  return exogym::runtime::manifest::parse_manifest(m, ".", "test").runs.at(0);
}

}  // namespace

TEST_CASE("available memory: MemAvailable, or less where a cgroup limit leaves less", "[resources]") {
  TempDir dir("memory");
  write(dir / "meminfo", "MemTotal:       24683620 kB\nMemFree:  1000 kB\nMemAvailable:   13092004 kB\n");
  CHECK(available_memory(dir / "meminfo", dir / "no-cgroup") == uint64_t{13092004} * 1024);
  // cgroup v2: 2 GiB allowed, 0.5 GiB used.
  write(dir / "v2" / "memory.max", std::to_string(2 * kGiB) + "\n");
  write(dir / "v2" / "memory.current", std::to_string(kGiB / 2) + "\n");
  CHECK(available_memory(dir / "meminfo", dir / "v2") == 3 * kGiB / 2);
  // "max": no limit.
  write(dir / "v2max" / "memory.max", "max\n");
  write(dir / "v2max" / "memory.current", "12345\n");
  CHECK(available_memory(dir / "meminfo", dir / "v2max") == uint64_t{13092004} * 1024);
  // cgroup v1 says "no limit" with a huge number.
  write(dir / "v1" / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");
  write(dir / "v1" / "memory" / "memory.usage_in_bytes", "13727494144\n");
  CHECK(available_memory(dir / "meminfo", dir / "v1") == uint64_t{13092004} * 1024);
  CHECK_FALSE(available_memory(dir / "none", dir / "none").has_value());
  // This host's, read for real.
  REQUIRE(available_memory().has_value());
  CHECK(*available_memory() > 0);
}

TEST_CASE("the memory check names nodes when one node fits, else the model's options, and --force only warns",
          "[resources]") {
  const auto m = manifest_of(small_manifest(1000));
  // 100 MB of trainable parameters: 400 MB a node with gradients and Adam.
  const ReplicaBytes one{100'000'000, 100'000'000};
  CHECK(exogym::runtime::train::nodes_memory_floor(one, 1000) == 400'000'000'000);
  CHECK_NOTHROW(check_memory(m, one, 1000, {400'000'000'000, false}));
  CHECK_NOTHROW(check_memory(m, one, 1000, {std::nullopt, false}));  // unknown: no check
  try {
    check_memory(m, one, 1000, {16 * kGiB, false});
    FAIL("not refused");
  } catch (const ConfigError& e) {
    CHECK(e.path() == "nodes");
    CHECK_THAT(e.message(), Catch::StartsWith("1000 nodes need at least 400 GB (400 MB each") &&
                                Catch::Contains("17.2 GB is available") && Catch::EndsWith("--force to try anyway"));
  }
  try {
    check_memory(m, one, 1000, {300'000'000, false});
    FAIL("not refused");
  } catch (const ConfigError& e) {
    CHECK(e.path() == "model.options");
    CHECK_THAT(e.message(), Catch::StartsWith("one node of the model \"mlp\" needs at least 400 MB"));
  }
  CHECK_NOTHROW(check_memory(m, one, 1000, {300'000'000, true}));
}

TEST_CASE("a run whose nodes cannot fit is refused naming nodes before the other replicas are built", "[resources]") {
  TempDir dir("too-many-nodes");
  auto m = small_manifest(1000);
  // 67 M parameters: 270 MB a replica, over 1 TB for 1000 nodes.
  m["model"]["options"]["hidden"] = {8192, 8192};
  m["data"]["train"]["options"]["num_examples"] = 16000;
  const auto started = std::chrono::steady_clock::now();
  const ConfigError e = limits_error(m, dir);
  CHECK(e.path() == "nodes");
  CHECK_THAT(e.message(), Catch::StartsWith("1000 nodes need at least 1.08 TB"));
  // Refused after one replica, not after a thousand (about 270 GB).
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(60));
  CHECK_FALSE(fs::exists(dir / "run"));
}

TEST_CASE("a model too large to allocate is an error naming the model's options", "[resources]") {
  // With overcommit always on (1), a 4 TB allocation would succeed and the
  // kernel kill the process later: there is nothing to check.
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  overcommit >> mode;
  if (mode == 1) {
    WARN("skipped: vm.overcommit_memory is 1");
    return;
  }
  TempDir dir("too-wide");
  auto m = small_manifest(2);
  m["model"]["options"]["hidden"] = {1'000'000, 1'000'000};  // a 4 TB weight
  const ConfigError e = limits_error(m, dir);
  CHECK(e.path() == "model.options");
  // LibTorch's words, without its stack trace.
  CHECK_THAT(e.message(), Catch::StartsWith("the model \"mlp\" does not fit in memory: ") &&
                              Catch::Contains("DefaultCPUAllocator") &&
                              Catch::Contains("allocate 4000000000000 bytes") && !Catch::Contains("frame #"));
}

TEST_CASE("threads beyond the process's cores and parallelism beyond the nodes are refused naming the field",
          "[resources]") {
  TempDir dir("threads");
  auto m = small_manifest(2);
  m["threads"] = 1'000'000;
  const ConfigError threads = limits_error(m, dir);
  CHECK(threads.path() == "threads");
  CHECK_THAT(threads.message(), Catch::StartsWith("1000000 intra-op threads per computing node, but this process has"));
  m = small_manifest(2);
  m["parallelism"] = 5;
  CHECK_THROWS_MATCHES(manifest_of(m), ConfigError,
                       Catch::Message("parallelism: 5 nodes computing at once, but the run has 2 nodes; at most "
                                      "nodes (0: automatic)"));
  m["parallelism"] = 2;
  CHECK_NOTHROW(manifest_of(m));
}
