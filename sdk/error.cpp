#include "exogym/sdk/error.h"

#include <cstring>

#include "exogym/sdk/check.h"

namespace exogym::sdk {

namespace {

std::string printable(const std::string& text) {
  // what() is read as a C string: a NUL in a JSON key would cut the message
  // short, and other control characters garble a terminal.
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7F) {
      out += c;
      continue;
    }
    static const char* const kHex = "0123456789abcdef";
    out += "\\u00";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xF];
  }
  return out;
}

}  // namespace

ConfigError::ConfigError(std::string path, const std::string& message)
    : Error(printable(path.empty() ? message : path + ": " + message)), path_(std::move(path)), message_(message) {}

namespace detail {

void throw_internal_error(const char* file, int line, const char* condition, const std::string& message) {
  // __FILE__ is the path the compiler was given ("../runtime/comm/x.cpp" or
  // absolute): name the file from the repository's top folders on. tests/
  // first: its folders are named after the others (tests/runtime/comm/).
  std::string where = file;
  for (const char* top : {"tests/", "runtime/", "sdk/", "plugins/", "models/", "tools/"}) {
    const size_t at = where.rfind(std::string("/") + top);
    if (at != std::string::npos) {
      where = where.substr(at + 1);
      break;
    }
  }
  throw InternalError("internal error at " + where + ":" + std::to_string(line) + " (check `" + condition +
                      "` failed): " + message + ". This is a bug in ExoGym or in a plugin; please report it.");
}

}  // namespace detail

}  // namespace exogym::sdk
