// exogym-bench: how much does the simulator cost beyond the training compute?
//
// For each model and node count it trains the same work twice, each in a
// fresh child process (so that peak memory and start-up are measured alone):
// once with the simulator (an "allreduce" run, outputs and metering on) and
// once with a bare LibTorch loop (tools/bench/bare_loop.h). It prints a table,
// checks the performance targets, and writes everything as JSON.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "bench/benchmark.h"
#include "bench/child.h"
#include "bench/options.h"
#include "cli/tool.h"

int main(int argc, char** argv) {
  // First: the time LibTorch's loading took is this process's age now.
  const double age_at_main = exogym::bench::process_age();
  // A measurement in a fresh process, started by the harness itself, which
  // reads the error from its output.
  if (argc == 3 && std::string(argv[1]) == "--child") {
    try {
      return exogym::bench::run_child(argv[2], age_at_main);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exogym-bench: %s\n", e.what());
      return exogym::tools::kFailure;
    }
  }
  exogym::tools::Tool tool("exogym-bench", exogym::bench::kDescription);
  exogym::bench::BenchOptions options;
  exogym::bench::add_options(tool.app(), options);
  return tool.run(argc, argv, [&] {
    exogym::bench::finish_options(options, std::filesystem::path(EXOGYM_SOURCE_DIR) / "examples" / "data");
    return exogym::bench::run_benchmark(options);
  });
}
