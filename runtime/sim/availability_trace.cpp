#include "exogym/runtime/sim/availability_trace.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "exogym/runtime/util/text_lines.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::sim {

namespace {

constexpr std::array<const char*, 5> kColumns = {"client", "time", "available", "speed", "bandwidth"};
// A row is five short numbers; a longer line is not a trace (a binary file,
// a file of one huge line), and stopping there bounds what is held and
// echoed.
constexpr size_t kMaxLine = 4096;
// The lowest bandwidth, as network.bandwidth's (util/units.h): 1 bit/s.
constexpr double kMinBandwidth = 1.0 / 8;

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// A field as messages show it: quoted, escaped, and shortened.
std::string quoted_field(const std::string& text) { return sdk::json_excerpt(nlohmann::json(text)); }
// A field that parsed as a number, shortened.
std::string shown(const std::string& text) { return text.size() <= 40 ? text : text.substr(0, 37) + "..."; }

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
  // Opens `file`: what is not a regular file is refused before a byte is read.
  TraceReader(const std::filesystem::path& file, std::string json_path)
      : file_(file.string()), json_path_(std::move(json_path)) {
    try {
      lines_.emplace(file, kMaxLine);
    } catch (const sdk::DataError& e) {
      throw sdk::ConfigError(json_path_, e.what());
    }
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw sdk::ConfigError(json_path_, file_ + ":" + std::to_string(line_) + ": " + message);
  }

  // The next line that is not blank, checked as text, without a byte-order
  // mark before the header; false at the end of the file.
  bool next(std::string& line) {
    while (true) {
      try {
        if (!lines_->next(line)) return false;
      } catch (const sdk::DataError& e) {
        throw sdk::ConfigError(json_path_, std::string(e.what()) + "; a trace's rows are five short columns");
      }
      line_ = lines_->line_number();
      check_text(line);
      // A UTF-8 byte-order mark, which some editors put first, is not part of the first name.
      if (line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
      if (!trimmed(line).empty()) return true;
    }
  }
  int64_t line() const { return line_; }

  // A line as text: no NUL byte, which C's number parsing would take for
  // the field's end ("2\0xyz" read as 2).
  void check_text(const std::string& line) const {
    const size_t nul = line.find('\0');
    if (nul != std::string::npos)
      fail("a NUL byte at column " + std::to_string(nul + 1) + ": a trace is a text file of comma-separated rows");
  }

  // The header's column of each of kColumns.
  std::array<size_t, kColumns.size()> columns(const std::string& header) const {
    std::array<size_t, kColumns.size()> where;
    where.fill(std::string::npos);
    const std::vector<std::string> names = fields_of(header);
    for (size_t i = 0; i < names.size(); ++i) {
      const auto known = std::find_if(kColumns.begin(), kColumns.end(), [&](const char* c) { return names[i] == c; });
      if (known == kColumns.end())
        fail("unknown column " + quoted_field(names[i]) + "; the header is client,time,available,speed,bandwidth");
      size_t& slot = where[static_cast<size_t>(known - kColumns.begin())];
      if (slot != std::string::npos) fail("column " + quoted_field(names[i]) + " appears twice");
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
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value))
      fail(std::string(column) + ": expected a number, got " + quoted_field(text));
    return value;
  }

  std::optional<double> positive_or_empty(const std::string& text, const char* column, double least = 0) const {
    if (text.empty()) return std::nullopt;
    const double value = number(text, column);
    if (!(value > 0)) fail(std::string(column) + ": expected a positive number or nothing, got " + shown(text));
    if (value < least) {
      fail(std::string(column) + ": expected at least " + sdk::json_excerpt(least) + " (1 bit/s) or nothing, got " +
           shown(text));
    }
    return value;
  }

 private:
  std::string file_;
  std::string json_path_;
  std::optional<util::TextLines> lines_;
  int64_t line_ = 0;
};

}  // namespace

AvailabilityTrace AvailabilityTrace::read(const std::filesystem::path& file, int clients,
                                          const std::string& json_path) {
  TraceReader reader(file, json_path);
  // The rows so far by client: as many clients as the rows name, not the
  // count the manifest gives (a population's clients may be absurdly many,
  // checked against the rows only at the end).
  struct ClientRows {
    std::vector<Row> rows;
    int64_t last_line = 0;  // the line of its last row, for messages
    std::string last_time;  // its time as written
  };
  std::map<int, ClientRows> by_client;
  int64_t rows = 0;
  std::string line;
  std::array<size_t, kColumns.size()> where{};
  bool header = false;
  while (reader.next(line)) {
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
      reader.fail("client " + shown(client_text) + " is not in a run of " + std::to_string(clients) +
                  " clients (0 to " + std::to_string(clients - 1) + ")");
    }
    Row row;
    row.time = reader.number(fields[where[1]], "time");
    if (row.time < 0) reader.fail("time: expected seconds at or after 0, got " + shown(fields[where[1]]));
    const std::string& available = fields[where[2]];
    if (available != "0" && available != "1") reader.fail("available: expected 0 or 1, got " + quoted_field(available));
    row.available = available == "1";
    row.speed = reader.positive_or_empty(fields[where[3]], "speed");
    row.bandwidth = reader.positive_or_empty(fields[where[4]], "bandwidth", kMinBandwidth);
    ClientRows& client = by_client[static_cast<int>(client_value)];
    if (!client.rows.empty() && row.time < client.rows.back().time) {
      reader.fail("time " + shown(fields[where[1]]) + " goes back for client " + shown(client_text) +
                  ": its row on line " + std::to_string(client.last_line) + " is at " + shown(client.last_time) +
                  "; a client's times must not decrease");
    }
    client.rows.push_back(row);
    client.last_line = reader.line();
    client.last_time = fields[where[1]];
    ++rows;
  }
  if (!header) throw sdk::ConfigError(json_path, file.string() + ": the trace is empty; it needs a header line");
  // Every client has a row: as many clients named as the run has, each in range.
  if (by_client.size() != static_cast<size_t>(clients)) {
    int missing = 0;
    for (const auto& entry : by_client) {
      if (entry.first != missing) break;
      ++missing;
    }
    throw sdk::ConfigError(json_path, file.string() + ": client " + std::to_string(missing) +
                                          " has no row; the trace must name every client of the run (0 to " +
                                          std::to_string(clients - 1) + ")");
  }
  AvailabilityTrace trace;
  trace.by_client_.reserve(by_client.size());
  for (auto& entry : by_client) trace.by_client_.push_back(std::move(entry.second.rows));
  trace.rows_ = rows;
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
