#pragma once
// An availability trace (docs/simulation.md#availability-traces): a CSV file
// that says, client by client and over simulated time, whether a client can
// be drawn into a round and at what compute speed and bandwidth it works, as
// device traces of real federated populations do.
//
//     client,time,available,speed,bandwidth
//     0,0,1,1,12500000
//     0,3600,0,,
//
// A client's state at time t is its last row with time <= t; before its
// first row it is available with the manifest's factors. An empty speed or
// bandwidth keeps the manifest's value (compute.speed, the drawn
// distributions, network.bandwidth). Every client of the run must have a
// row, so that a trace for another population is not taken by mistake.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::sim {

// A client's state at some time, as the trace says.
struct ClientState {
  bool available = true;
  std::optional<double> speed;      // a compute-speed factor; nullopt: the manifest's
  std::optional<double> bandwidth;  // bytes per second; nullopt: the manifest's
};

class AvailabilityTrace {
 public:
  // Reads `file` for a run of `clients` clients (ranks 0 to clients - 1).
  // Throws sdk::ConfigError at `json_path` with a message that starts with
  // the file and line of the fault: a file that is missing or not a regular
  // file (a FIFO, a device, a folder: refused before a byte is read), a line
  // longer than 4096 bytes or holding a NUL byte, a header without exactly
  // the five columns, a row with too few or too many fields, a field that is
  // not a number (or for `available`, not 0 or 1), a client outside the
  // run, a time that is negative or before the client's previous row, a
  // speed or bandwidth that is not positive (a bandwidth below 1 bit/s), a
  // client without any row. A UTF-8 byte-order mark before the header is
  // skipped. What it holds grows with the rows, never with `clients`.
  static AvailabilityTrace read(const std::filesystem::path& file, int clients, const std::string& json_path);

  // The state of `client` at simulated time `time` (seconds).
  ClientState at(int client, double time) const;
  // The clients in `among` (sorted) that are available at `time`.
  std::vector<int> available(const std::vector<int>& among, double time) const;

  int clients() const { return static_cast<int>(by_client_.size()); }
  int64_t rows() const { return rows_; }

 private:
  struct Row {
    double time;
    bool available;
    std::optional<double> speed, bandwidth;
  };
  std::vector<std::vector<Row>> by_client_;
  int64_t rows_ = 0;
};

}  // namespace exogym::runtime::sim
