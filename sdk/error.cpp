#include "exogym/sdk/error.h"

#include <cstring>

namespace exogym::sdk::detail {

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

}  // namespace exogym::sdk::detail
