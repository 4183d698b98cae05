#pragma once
// User-facing errors. Messages name what the user can fix: the manifest's JSON
// path, the plugin file, the node and the step.
#include <stdexcept>
#include <string>

namespace exogym::sdk {

// Base of every error ExoGym raises on purpose (as opposed to bugs).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad manifest or plugin options. `path` is the JSON path, e.g.
// "strategy.options.H"; what() reads "strategy.options.H: expected ...".
class ConfigError : public Error {
 public:
  ConfigError(std::string path, const std::string& message)
      : Error(path.empty() ? message : path + ": " + message), path_(std::move(path)), message_(message) {}
  const std::string& path() const { return path_; }
  // The message without the path (to re-raise it under a longer path).
  const std::string& message() const { return message_; }

 private:
  std::string path_;
  std::string message_;
};

// A plugin could not be found, loaded, or is incompatible.
class PluginError : public Error {
 public:
  using Error::Error;
};

// Reading a dataset failed (missing file, bad magic, truncated data).
class DataError : public Error {
 public:
  using Error::Error;
};

// Raised inside a collective when another node failed: the run is being torn
// down. Never the root cause; the runtime reports the first real error.
class AbortedError : public Error {
 public:
  using Error::Error;
};

}  // namespace exogym::sdk
