// The test runner. Catch2 2 builds its runner in the file that defines
// CATCH_CONFIG_RUNNER; Catch2 3's is in its library. Both take this main.
#define CATCH_CONFIG_RUNNER
#include "testing.h"

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
