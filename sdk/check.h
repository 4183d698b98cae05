#pragma once
// Invariants only a bug can break: an argument an internal caller must get right, a state that cannot
// happen. What a user can get wrong is an sdk::Error (error.h) instead.
#include <stdexcept>
#include <string>

namespace exogym::sdk {

// A bug in ExoGym or a plugin, never the user's doing: deliberately not an sdk::Error.
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

namespace detail {
// "internal error at runtime/x.cpp:42 (check `a < b` failed): <message>. This is a bug; please report it."
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace exogym::sdk

// Throws InternalError naming the file and line unless `condition` holds.
#define EXOGYM_CHECK_INTERNAL(condition, message)                                                             \
  do {                                                                                                        \
    if (!(condition)) ::exogym::sdk::detail::throw_internal_error(__FILE__, __LINE__, #condition, (message)); \
  } while (false)
