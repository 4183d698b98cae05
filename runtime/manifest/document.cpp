#include "exogym/runtime/manifest/document.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/json_limits.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::manifest {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::ConfigError;

namespace {

std::string quoted(const fs::path& file) {
  return json(file.string()).dump(-1, ' ', false, json::error_handler_t::replace);
}

// nlohmann keeps the last of two equal keys silently; a manifest that sets
// "nodes" twice is a mistake to report, naming the key's JSON path.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        enter_element();
        stack_.push_back({true, {}, {}, -1});
        break;
      case json::parse_event_t::array_start:
        enter_element();
        stack_.push_back({false, {}, {}, -1});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack_.empty()) stack_.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& top = stack_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) {
          throw ConfigError(current_path(), "duplicate key (JSON would keep only the last value)");
        }
        break;
      }
      case json::parse_event_t::value:
        enter_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    long index;
  };

  void enter_element() {
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
  }

  std::string current_path() const {
    std::string path;
    for (const auto& frame : stack_) {
      if (!frame.is_object) {
        path += "[" + std::to_string(frame.index) + "]";
      } else {
        path += (path.empty() ? "" : ".") + frame.key;
      }
    }
    return path;
  }

  std::vector<Frame> stack_;
};

// nlohmann reports a byte offset (1-based, pointing at the last character
// read); users want the line and column their editor shows.
std::string syntax_error_message(const fs::path& file, const std::string& text, const json::parse_error& error) {
  const size_t offset = std::min<size_t>(error.byte > 0 ? error.byte - 1 : 0, text.size());
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  size_t column = offset + 1;
  if (offset > 0) {
    const size_t newline = text.rfind('\n', offset - 1);
    if (newline != std::string::npos) column = offset - newline;
  }
  // Keep nlohmann's description ("syntax error while parsing object - ...")
  // and drop its own "[json.exception...] parse error at ...:" prefix.
  std::string detail = error.what();
  const size_t parse_error = detail.find("parse error");
  if (parse_error != std::string::npos) {
    const size_t colon = detail.find(": ", parse_error);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
  }
  return "invalid JSON in manifest " + quoted(file) + " at line " + std::to_string(line) + ", column " +
         std::to_string(column) + ": " + detail;
}

std::string read_text(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) throw ConfigError("", "manifest file " + quoted(file) + " does not exist");
  if (fs::is_directory(file, ec)) throw ConfigError("", "manifest " + quoted(file) + " is a directory, not a file");
  // A FIFO would block, /dev/zero or /dev/urandom never end.
  if (!fs::is_regular_file(file, ec)) throw ConfigError("", "manifest " + quoted(file) + " is not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("", "cannot read manifest " + quoted(file) + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw ConfigError("", "cannot read manifest " + quoted(file) + ": " + std::strerror(errno));
  return buffer.str();
}

}  // namespace

json read_json_document(const fs::path& file) {
  const std::string text = read_text(file);
  if (auto violation = find_json_limit_violation(text)) {
    throw ConfigError("", "invalid JSON in manifest " + quoted(file) + " at line " + std::to_string(violation->line) +
                              ", column " + std::to_string(violation->column) + ": " + violation->message);
  }
  try {
    return json::parse(text, DuplicateKeyCheck(), /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& error) {
    throw ConfigError("", syntax_error_message(file, text, error));
  }
}

}  // namespace exogym::runtime::manifest
