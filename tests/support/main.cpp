// The test runner. Catch2 2 builds its runner in the file that defines
// CATCH_CONFIG_RUNNER; Catch2 3's is in its library. Both take this main.
#define CATCH_CONFIG_RUNNER
#include <cstdlib>

#include "testing.h"

int main(int argc, char* argv[]) {
  // Every checkpoint a test writes is read back once and checked against
  // its digest (checkpoint/node_state.h), in this process and in the
  // exogym-run processes the tests start, which inherit the environment.
  setenv("EXOGYM_VERIFY_CHECKPOINTS", "1", /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
