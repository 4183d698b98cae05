// A checkpoint is one snapshot of the run (issue #53's data loss): with
// partial participation, the nodes that sit a round out reached the
// checkpoint while the others still took the round's last step, and saved
// DiLoCo's master copy (shared by the process's nodes) while the first node
// past the average stepped it, so that the file's bytes no longer matched
// its digest and the resume refused the checkpoint as damaged. Repeated
// here many times, with more compute slots than cores; every node file is
// read back right after it is written (EXOGYM_VERIFY_CHECKPOINTS, set for
// every test in tests/support/main.cpp), and each checkpoint must resume.
// tools/dev sanitize thread runs it under ThreadSanitizer too.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("checkpoints written while nodes sit rounds out are one snapshot, every time", "[checkpoint]") {
  REQUIRE(runtime::checkpoint::verify_after_writing());
  for (const char* strategy : {"diloco", "sparta_diloco"}) {
    for (int attempt = 0; attempt < 6; ++attempt) {
      INFO(strategy << ", attempt " << attempt);
      TempDir dir("snapshot");
      json m = checkpointed_manifest(8, 3);
      // A model large enough that the outer step takes a while.
      m["model"]["options"]["hidden"] = {512};
      m["parallelism"] = 8;
      m["strategy"] = {{"plugin", strategy}, {"options", {{"H", 3}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
      m["participation"] = {{"per_round", 3}};
      m["checkpoint"]["keep"] = 10;
      m["train"]["max_steps"] = 18;
      train_into(m, dir / "run");
      // Every checkpoint resumes: the latest here, the others by their
      // files (their digests were checked right after writing).
      for (int64_t step = 3; step <= 18; step += 3) {
        const fs::path folder = dir / "run" / "checkpoints" / ("step-" + std::to_string(step));
        for (int rank = 0; rank < 8; ++rank) CHECK_NOTHROW(runtime::checkpoint::read_node_state(folder, rank, step));
      }
      resume_in(dir / "run", {}, 12);
    }
  }
}

}  // namespace exogym::test
