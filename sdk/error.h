#pragma once
// Errors. Those a user can fix (sdk::Error and its kinds) name the manifest's JSON path, the plugin file, the node and
// the step. A broken invariant is a bug instead: EXOGYM_CHECK_INTERNAL (check.h).
#include <stdexcept>
#include <string>

namespace exogym::sdk {

// Base of every error ExoGym raises on purpose.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad manifest or plugin options: what() reads "<path>: <message>", e.g. "strategy.options.H: expected ...".
class ConfigError : public Error {
 public:
  ConfigError(std::string path, const std::string& message);  // control characters shown as \u00XX
  const std::string& path() const { return path_; }
  const std::string& message() const { return message_; }  // without the path

 private:
  std::string path_;
  std::string message_;
};

// A plugin could not be found or loaded, or is incompatible.
struct PluginError : Error {
  using Error::Error;
};

// Reading input failed: a dataset (missing file, bad magic, truncated) or a file the user points at.
struct DataError : Error {
  using Error::Error;
};

// Thrown inside a collective when another node failed: never the root cause, which the run reports.
struct AbortedError : Error {
  using Error::Error;
};

}  // namespace exogym::sdk
