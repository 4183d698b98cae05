#include "exogym/runtime/sim/availability_trace.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

namespace {

constexpr std::array<const char*, 5> kColumns = {"client", "time", "available", "speed", "bandwidth"};

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(trimmed(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return fields;
    start = comma + 1;
  }
}

// Reads one file, keeping its name and the line for every message.
class TraceReader {
 public:
  TraceReader(const std::filesystem::path& file, std::string json_path)
      : file_(file.string()), json_path_(std::move(json_path)) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw sdk::ConfigError(json_path_, file_ + ":" + std::to_string(line_) + ": " + message);
  }
  void at_line(int64_t line) { line_ = line; }

  // The header's column of each of kColumns.
  std::array<size_t, kColumns.size()> columns(const std::string& header) const {
    std::array<size_t, kColumns.size()> where;
    where.fill(std::string::npos);
    const std::vector<std::string> names = fields_of(header);
    for (size_t i = 0; i < names.size(); ++i) {
      const auto known = std::find_if(kColumns.begin(), kColumns.end(), [&](const char* c) { return names[i] == c; });
      if (known == kColumns.end())
        fail("unknown column \"" + names[i] + "\"; the header is client,time,available,speed,bandwidth");
      size_t& slot = where[static_cast<size_t>(known - kColumns.begin())];
      if (slot != std::string::npos) fail("column \"" + names[i] + "\" appears twice");
      slot = i;
    }
    for (size_t c = 0; c < kColumns.size(); ++c) {
      if (where[c] == std::string::npos)
        fail(std::string("missing column \"") + kColumns[c] +
             "\"; the header is client,time,available,speed,bandwidth");
    }
    return where;
  }

  double number(const std::string& text, const char* column) const {
    char* end = nullptr;
    errno = 0;
    const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
      fail(std::string(column) + ": expected a number, got \"" + text + "\"");
    return value;
  }

  std::optional<double> positive_or_empty(const std::string& text, const char* column) const {
    if (text.empty()) return std::nullopt;
    const double value = number(text, column);
    if (!(value > 0)) fail(std::string(column) + ": expected a positive number or nothing, got " + text);
    return value;
  }

 private:
  std::string file_;
  std::string json_path_;
  int64_t line_ = 0;
};

}  // namespace

AvailabilityTrace AvailabilityTrace::read(const std::filesystem::path& file, int clients,
                                          const std::string& json_path) {
  TraceReader reader(file, json_path);
  std::ifstream in(file);
  if (!in) throw sdk::ConfigError(json_path, file.string() + ": cannot read the trace file");
  AvailabilityTrace trace;
  trace.by_client_.resize(static_cast<size_t>(clients));
  // Each client's last row: its line and its time as written, for messages.
  std::vector<int64_t> last_line(static_cast<size_t>(clients), 0);
  std::vector<std::string> last_time(static_cast<size_t>(clients));
  std::string line;
  int64_t number = 0;
  std::array<size_t, kColumns.size()> where{};
  bool header = false;
  while (std::getline(in, line)) {
    reader.at_line(++number);
    if (trimmed(line).empty()) continue;
    if (!header) {
      where = reader.columns(line);
      header = true;
      continue;
    }
    const std::vector<std::string> fields = fields_of(line);
    if (fields.size() != kColumns.size()) {
      reader.fail("expected " + std::to_string(kColumns.size()) + " fields, got " + std::to_string(fields.size()));
    }
    const std::string& client_text = fields[where[0]];
    const double client_value = reader.number(client_text, "client");
    if (client_value != std::floor(client_value) || client_value < 0 || client_value >= clients) {
      reader.fail("client " + client_text + " is not in a run of " + std::to_string(clients) + " clients (0 to " +
                  std::to_string(clients - 1) + ")");
    }
    const auto client = static_cast<size_t>(client_value);
    Row row;
    row.time = reader.number(fields[where[1]], "time");
    if (row.time < 0) reader.fail("time: expected seconds at or after 0, got " + fields[where[1]]);
    const std::string& available = fields[where[2]];
    if (available != "0" && available != "1") reader.fail("available: expected 0 or 1, got \"" + available + "\"");
    row.available = available == "1";
    row.speed = reader.positive_or_empty(fields[where[3]], "speed");
    row.bandwidth = reader.positive_or_empty(fields[where[4]], "bandwidth");
    std::vector<Row>& rows = trace.by_client_[client];
    if (!rows.empty() && row.time < rows.back().time) {
      reader.fail("time " + fields[where[1]] + " goes back for client " + client_text + ": its row on line " +
                  std::to_string(last_line[client]) + " is at " + last_time[client] +
                  "; a client's times must not decrease");
    }
    rows.push_back(row);
    last_line[client] = number;
    last_time[client] = fields[where[1]];
    ++trace.rows_;
  }
  if (!header) throw sdk::ConfigError(json_path, file.string() + ": the trace is empty; it needs a header line");
  for (size_t c = 0; c < trace.by_client_.size(); ++c) {
    if (trace.by_client_[c].empty()) {
      throw sdk::ConfigError(json_path, file.string() + ": client " + std::to_string(c) +
                                            " has no row; the trace must name every client of the run (0 to " +
                                            std::to_string(clients - 1) + ")");
    }
  }
  return trace;
}

ClientState AvailabilityTrace::at(int client, double time) const {
  const std::vector<Row>& rows = by_client_.at(static_cast<size_t>(client));
  // The last row at or before `time`: later rows at one time win.
  const auto after =
      std::upper_bound(rows.begin(), rows.end(), time, [](double t, const Row& r) { return t < r.time; });
  if (after == rows.begin()) return {};
  const Row& row = *std::prev(after);
  return {row.available, row.speed, row.bandwidth};
}

std::vector<int> AvailabilityTrace::available(const std::vector<int>& among, double time) const {
  std::vector<int> out;
  for (int client : among) {
    if (at(client, time).available) out.push_back(client);
  }
  return out;
}

}  // namespace exogym::runtime::sim
