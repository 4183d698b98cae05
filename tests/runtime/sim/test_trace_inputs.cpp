// Availability traces that are not what they should be (issue #53): what is
// not a regular file (a FIFO blocked for ever, /dev/zero was read for
// gigabytes), a byte-order mark, NUL bytes inside a field, a line of any
// length, a population far larger than the rows, and a first round with
// nobody available: each refused at start-up at participation.trace, within
// seconds, before a run folder exists; the byte-order mark is skipped.
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "cli_helpers.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using exogym::test::parse_error;
using exogym::test::write_bytes;
using nlohmann::json;

namespace {

const std::string kHeader = "client,time,available,speed,bandwidth\n";

// FedAvg with rounds of 2 steps of 100 ms, `per_round` of `nodes` drawn.
json traced(int nodes, int per_round, const std::string& trace) {
  json m = small_manifest(nodes);
  m["compute"] = {{"step_time", "100ms"}};
  m["strategy"] = {{"plugin", "fedavg"}, {"options", {{"H", 2}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}}};
  m["participation"] = {{"per_round", per_round}, {"trace", trace}};
  return m;
}

}  // namespace

TEST_CASE("availability trace: what is not a regular file is refused at once, saying what it is",
          "[participation][trace]") {
  TempDir dir("trace-not-regular");
  REQUIRE(::mkfifo((dir / "fifo.csv").c_str(), 0600) == 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "fifo.csv").string(), "a FIFO, not a regular file"},
      {"/dev/zero", "a device, not a regular file"},
      {dir.path().string(), "a folder, not a regular file"},
      {(dir / "absent.csv").string(), "missing"},
  };
  for (const auto& [file, what] : cases) {
    INFO(file);
    const auto started = std::chrono::steady_clock::now();
    CHECK(parse_error(traced(2, 1, file), dir.path()) == "participation.trace: " + file + ": " + what);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  }
}

TEST_CASE("availability trace: a FIFO stops exogym-run over two processes with exit 2, no folder, no hang",
          "[participation][trace]") {
  TempDir dir("trace-fifo-cli");
  REQUIRE(::mkfifo((dir / "fifo.csv").c_str(), 0600) == 0);
  json m = traced(2, 1, (dir / "fifo.csv").string());
  m["output"]["dir"] = (dir / "out").string();
  const fs::path manifest = write_manifest(dir, "m", m);
  const Outcome o =
      run_cli({manifest.string(), "--nproc", "2", "--timeout", "10", "--progress=none"}, dir / "cli.log", 60);
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.seconds < 30);
  CHECK(o.output.find("participation.trace: " + (dir / "fifo.csv").string() + ": a FIFO, not a regular file") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out" / "test"));
}

TEST_CASE("availability trace: a UTF-8 byte-order mark is skipped, a NUL byte inside a field is refused",
          "[participation][trace]") {
  TempDir dir("trace-bytes");
  const std::string at = "participation.trace: " + (dir / "t.csv").string();
  write_bytes(dir / "t.csv", "\xEF\xBB\xBF" + kHeader + "0,0,1,,\n1,0,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) == "(no error)");
  // "2\0xyz" was read as client 2 (C's parsing stops at the NUL).
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,\n" + std::string("1\0xyz", 5) + ",0,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":3: a NUL byte at column 2: a trace is a text file of comma-separated rows");
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,\n1,0,1,," + std::string("\0", 1) + "\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":3: a NUL byte at column 8: a trace is a text file of comma-separated rows");
  // A bandwidth below 1 bit/s, as network.bandwidth's floor.
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,1e-300\n1,0,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":2: bandwidth: expected at least 0.125 (1 bit/s) or nothing, got 1e-300");
}

TEST_CASE("availability trace: a huge line stops the read at 4096 bytes and a message echoes at most 80 characters",
          "[participation][trace]") {
  TempDir dir("trace-long");
  const std::string at = "participation.trace: " + (dir / "t.csv").string();
  // A header of 100 MB was echoed whole; a line of 1 GB was read whole.
  write_bytes(dir / "t.csv", std::string(1 << 20, 'c') + "\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":1: a line longer than 4096 bytes; a trace's rows are five short columns");
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,\n" + std::string(5000, '1') + ",0,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":3: a line longer than 4096 bytes; a trace's rows are five short columns");
  const std::string name(4000, 'z');
  write_bytes(dir / "t.csv", "client,time," + name + "\n");
  const std::string message = parse_error(traced(2, 1, "t.csv"), dir.path());
  CHECK(message == at + ":1: unknown column \"" + std::string(76, 'z') +
                       "...; the header is client,time,available,speed,bandwidth");
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,\n5." + std::string(3000, '0') + ",0,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ":3: client 5." + std::string(35, '0') + "... is not in a run of 2 clients (0 to 1)");
}

TEST_CASE("availability trace: a population far beyond the rows is refused without memory for each client",
          "[participation][trace][population]") {
  TempDir dir("trace-clients");
  // 1e9 clients took std::bad_alloc; 5e7 took 3.3 GB before this error.
  write_bytes(dir / "t.csv", kHeader + "0,0,1,,\n1,0,1,,\n2,0,1,,\n3,0,1,,\n");
  json m = traced(2, 2, "t.csv");
  m["participation"]["clients"] = 1000000000;
  const auto started = std::chrono::steady_clock::now();
  CHECK(parse_error(m, dir.path()) == "participation.trace: " + (dir / "t.csv").string() +
                                          ": client 4 has no row; the trace must name every client of the run (0 to "
                                          "999999999)");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

TEST_CASE("availability trace: nobody available when the first round starts is refused before a run folder exists",
          "[participation][trace]") {
  TempDir dir("trace-nobody");
  const std::string at = "participation.trace: " + (dir / "t.csv").string();
  write_bytes(dir / "t.csv", kHeader + "0,0,0,,\n1,0,0,,\n1,5,1,,\n");
  CHECK(parse_error(traced(2, 1, "t.csv"), dir.path()) ==
        at + ": no client is available at time 0, when the first round starts (among the 2 nodes alive at step 0): "
             "a round needs at least one");
  // Only node 1 available, and it joins late: nobody at step 0 either.
  write_bytes(dir / "t.csv", kHeader + "0,0,0,,\n1,0,1,,\n");
  json late = traced(2, 1, "t.csv");
  late["faults"] = json::parse(R"([{"node": 1, "join_at": 4}])");
  CHECK(parse_error(late, dir.path()) ==
        at + ": no client is available at time 0, when the first round starts (among the 1 nodes alive at step 0): "
             "a round needs at least one");
  // A population: among all its clients.
  write_bytes(dir / "t.csv", kHeader + "0,0,0,,\n1,0,0,,\n2,0,0,,\n");
  json clients = traced(2, 1, "t.csv");
  clients["participation"]["clients"] = 3;
  CHECK(parse_error(clients, dir.path()) ==
        at + ": no client is available at time 0, when the first round starts (among the 3 clients): a round needs "
             "at least one");
  // As a user runs it: exit 2, no run folder left behind.
  json m = traced(2, 1, (dir / "t.csv").string());
  write_bytes(dir / "t.csv", kHeader + "0,0,0,,\n1,0,0,,\n");
  m["output"]["dir"] = (dir / "out").string();
  const Outcome o = run_cli({write_manifest(dir, "m", m).string(), "--progress=none"}, dir / "cli.log", 60);
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK_FALSE(fs::exists(dir / "out" / "test"));
}

}  // namespace exogym::test
