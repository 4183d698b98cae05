#pragma once
// Errors. User-facing ones (sdk::Error and its kinds) name what the user can
// fix: the manifest's JSON path, the plugin file, the node and the step. A
// broken invariant (EXOGYM_CHECK_INTERNAL) is a bug instead, and says so.
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
  ConfigError(std::string path, const std::string& message);  // control characters shown as \u00XX
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

// Reading input data failed: a dataset (missing file, bad magic, truncated
// data) or another file the user points at (a run folder, its model.pt).
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

// A broken invariant inside ExoGym or a plugin: a bug, never something the
// user did. Deliberately not an sdk::Error, so nothing mistakes it for one.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
// Throws InternalError: "internal error at runtime/x.cpp:42 (check `a < b`
// failed): <message>. This is a bug; please report it."
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace exogym::sdk

// Checks an invariant that only a bug can break (an argument an internal
// caller must get right, a state that cannot happen): throws
// sdk::InternalError naming the file and line. For what a user can get
// wrong, throw an sdk::Error (ConfigError, DataError, ...) instead.
#define EXOGYM_CHECK_INTERNAL(condition, message)                                                             \
  do {                                                                                                        \
    if (!(condition)) ::exogym::sdk::detail::throw_internal_error(__FILE__, __LINE__, #condition, (message)); \
  } while (false)
