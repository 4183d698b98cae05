// exogym-bench: how much does the simulator cost beyond the training compute?
//
// For each model and node count it trains the same work twice, each in a
// fresh child process (so that peak memory and start-up are measured alone):
// once with the simulator (an "allreduce" run, outputs and metering on) and
// once with a bare LibTorch loop (tools/bench/bare_loop.h). It prints a table,
// checks the performance targets, and writes everything as JSON.
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench/benchmark.h"
#include "bench/child.h"
#include "bench/options.h"

int main(int argc, char** argv) {
  // First: the time LibTorch's loading took is this process's age now.
  const double age_at_main = exogym::bench::process_age();
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "--child") return exogym::bench::run_child(args[1], age_at_main);
    const auto options =
        exogym::bench::parse_options(args, std::filesystem::path(EXOGYM_SOURCE_DIR) / "examples" / "data");
    if (options.help) {
      std::cout << exogym::bench::kUsage;
      return 0;
    }
    return exogym::bench::run_benchmark(options);
  } catch (const std::exception& e) {
    std::cerr << "exogym-bench: " << e.what() << std::endl;
    return 1;
  }
}
